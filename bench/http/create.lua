-- wrk script: POST /widgets with a fresh Idempotency-Key per request (every request executes).
local counter = 0
local thread_id = 0
function setup(thread)
  thread:set("id", thread_id)
  thread_id = thread_id + 1
end
function init(args)
  math.randomseed(os.time() + id)
  prefix = string.format("%d-%d-", id, math.random(1, 1e9))
end
request = function()
  counter = counter + 1
  local headers = {
    ["Authorization"] = "Bearer tok1",
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = prefix .. counter,
  }
  return wrk.format("POST", "/widgets", headers, '{"name":"bench"}')
end
