// Errors answered to clients, in OpenAI's shape with llama.cpp's extras:
//   {"error":{"code":400,"message":"...","type":"invalid_request_error","param":null, ...extra}}
// with the HTTP status equal to `code`. Everything a client can get wrong is one of these; any
// other exception reaching a handler is a server bug and becomes a 500.
#pragma once
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

namespace clover::server {

using json = nlohmann::ordered_json;

struct ApiError : std::exception {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  json extra = json::object();  // merged into the error object (n_prompt_tokens, n_ctx, param)

  ApiError(int status, std::string type, std::string message, json extra = json::object())
      : status(status), type(std::move(type)), message(std::move(message)), extra(std::move(extra)) {}
  const char* what() const noexcept override { return message.c_str(); }

  json body() const;
};

ApiError bad_request(std::string message, std::string param = "");  // 400 invalid_request_error
ApiError unavailable(std::string message);                           // 503 unavailable_error
ApiError server_error(std::string message);                          // 500 server_error

}  // namespace clover::server
