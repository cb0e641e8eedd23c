-- orphan_failing: the failures view V was recording (or, V = '', every view's: a resumed crawl)
-- have no one to record them: mark them orphans, for claim_failing. ARGV: prefix P, view V.
-- P failing: URL -> "<view>\t<kind>"; a value with no tab (written before the view was kept) is an
-- orphan of that kind. Returns the number orphaned.
local P, V = ARGV[1], ARGV[2]
local all = redis.call('HGETALL', P .. 'failing')
local n = 0
for i = 1, #all, 2 do
  local value = all[i + 1]
  local tab = string.find(value, '\t', 1, true)
  local owner = tab and string.sub(value, 1, tab - 1) or ''
  if owner ~= '' and (V == '' or owner == V) then
    redis.call('HSET', P .. 'failing', all[i], string.sub(value, tab))
    n = n + 1
  elseif not tab then
    redis.call('HSET', P .. 'failing', all[i], '\t' .. value)
    n = n + 1
  end
end
return n
