-- lease: an agent's fetch actors say it is alive (actors/lease.py), every few seconds.
-- ARGV: view prefix V, ttl (seconds). The lease runs until Redis's clock + ttl (one clock for every
-- machine; a value, not an expiring key: an expiry would be written to the AOF after a restart).
-- Refused (0) once the agent is fenced (fence.lua): a departed agent never starts fetching again
-- under its name, whatever its processes believe. Returns 1 when renewed.
local V, ttl = ARGV[1], tonumber(ARGV[2])
if redis.call('EXISTS', V .. 'fenced') == 1 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
if now + ttl > tonumber(redis.call('GET', V .. 'lease') or '0') then
  redis.call('SET', V .. 'lease', string.format('%.6f', now + ttl))
end
return 1
