-- wrk script: POST /plain/widgets (widgets built with `bench-plain-route`): the create handler in
-- one transaction through the same pipeline, without the idempotency executor (the floor).
request = function()
  local headers = {
    ["Authorization"] = "Bearer tok1",
    ["Content-Type"] = "application/json",
  }
  return wrk.format("POST", "/plain/widgets", headers, '{"name":"bench"}')
end
