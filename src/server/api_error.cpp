#include "server/api_error.h"

namespace clover::server {

json ApiError::body() const {
  json e = {{"code", status}, {"message", message}, {"type", type}, {"param", nullptr}};
  for (auto it = extra.begin(); it != extra.end(); ++it) e[it.key()] = it.value();
  return json{{"error", std::move(e)}};
}

ApiError bad_request(std::string message, std::string param) {
  json extra = json::object();
  if (!param.empty()) extra["param"] = param;
  return ApiError(400, "invalid_request_error", std::move(message), std::move(extra));
}

ApiError unavailable(std::string message) { return ApiError(503, "unavailable_error", std::move(message)); }

ApiError server_error(std::string message) { return ApiError(500, "server_error", std::move(message)); }

}  // namespace clover::server
