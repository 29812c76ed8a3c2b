# Writes OUT: a C++ file defining clover::synth::qwen35_chat_template() with the bytes of IN.
file(READ ${IN} content HEX)
string(LENGTH "${content}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
file(WRITE ${OUT} "#include <string_view>\nnamespace clover::synth {\nstatic const char kTemplate[] = {${bytes} 0};\nstd::string_view qwen35_chat_template() { return std::string_view(kTemplate, ${len}); }\n}\n")
