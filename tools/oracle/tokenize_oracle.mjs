#!/usr/bin/env node
// Batch tokenizer oracle: llama.cpp v0.5.0 (the CPU build bundled in node-llama-cpp 3.22.1) tokenises
// a list of texts with a (vocabulary-only) GGUF.
//
//   node tools/oracle/tokenize_oracle.mjs MODEL.gguf TEXTS.json OUT.json
//
// TEXTS.json: a JSON array of strings. OUT.json:
//   {"plain":   [[ids...], ...],   // llama_tokenize(text, add_special=false, parse_special=false)
//    "special": [[ids...], ...],   // the same with parse_special=true
//    "detok":   ["...", ...]}      // llama_detokenize(special ids, unparse_special=true)
// Texts travel as JavaScript strings, so they must be valid UTF-8.

import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, textsPath, outPath] = process.argv.slice(2);
if (!modelPath || !textsPath || !outPath) {
    process.stderr.write("usage: node tools/oracle/tokenize_oracle.mjs MODEL.gguf TEXTS.json OUT.json\n");
    process.exit(2);
}

const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
if (!Array.isArray(texts) || texts.some((t) => typeof t !== "string")) {
    process.stderr.write("tokenize_oracle: TEXTS.json must be an array of strings\n");
    process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, vocabOnly: true, gpuLayers: 0});

const plain = texts.map((t) => Array.from(model.tokenize(t, false)));
const special = texts.map((t) => Array.from(model.tokenize(t, true)));
const detok = special.map((ids) => model.detokenize(ids, true));

fs.writeFileSync(outPath, JSON.stringify({plain, special, detok}));
await model.dispose();
await llama.dispose();
