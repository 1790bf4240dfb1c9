-- wrk script: GET /widgets/{id} of one widget (the HTTP floor: auth, one indexed read, JSON).
request = function()
  return wrk.format("GET", "/widgets/" .. os.getenv("WIDGET_ID"), {["Authorization"] = "Bearer tok1"})
end
