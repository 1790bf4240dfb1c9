-- wrk script: POST /widgets retrying one of 100 completed keys (every request replays).
local counter = 0
request = function()
  counter = counter + 1
  local headers = {
    ["Authorization"] = "Bearer tok1",
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = "replay-" .. (counter % 100),
  }
  return wrk.format("POST", "/widgets", headers, '{"name":"bench"}')
end
