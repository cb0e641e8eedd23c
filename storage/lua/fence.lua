-- fence: declare an agent departed, once its lease has lapsed (actors/membership.py buries it).
-- ARGV: view prefix V. Returns the seconds its lease still runs ("> 0": nothing written, ask again),
-- or "0": fenced now or before. From then on lease.lua refuses it, and acquire, borrow, release and
-- commit by its view change nothing: a process of it that outlived its death (a node cut off, not
-- dead) can neither fetch nor undo what its successors did with its hosts.
local V = ARGV[1]
if redis.call('EXISTS', V .. 'fenced') == 1 then return '0' end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local lease = tonumber(redis.call('GET', V .. 'lease') or '0')
if lease > now then return string.format('%.6f', lease - now) end
redis.call('SET', V .. 'fenced', string.format('%.6f', now))
return '0'
