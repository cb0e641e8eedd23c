-- claim_failing: take up to n failures nobody records any more (their agent died, or the crawl
-- crashed: orphan_failing) for view V to record; each stays in P failing, now V's, so that V's death
-- orphans it again. ARGV: prefix P, view V, n. Returns url_1, kind_1, url_2, kind_2...
-- P failing: URL -> "<view V>\t<error kind>" ("\t<kind>": an orphan). The hash holds the failures
-- of a few uncommitted batches, so one HGETALL is cheap.
local P, V, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local all = redis.call('HGETALL', P .. 'failing')
local out = {}
for i = 1, #all, 2 do
  if #out >= 2 * n then break end
  local value = all[i + 1]
  if string.sub(value, 1, 1) == '\t' then
    redis.call('HSET', P .. 'failing', all[i], V .. value)
    out[#out + 1] = all[i]
    out[#out + 1] = string.sub(value, 2)
  end
end
return out
