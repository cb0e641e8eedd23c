"""The synthetic language of the in-vitro web: a Zipf vocabulary split into topics.

Words are pronounceable syllable strings chosen so that the project's text pipeline leaves them
alone (lower-case ASCII letters, not stopwords, Porter-stem-stable, pairwise distinct): a word
written on a page is then exactly one term for dedup, summaries, spam features and search.

Each topic owns a block of words of its own; a page of topic ``t`` draws most of its words from
topic ``t``'s Zipf distribution and the rest from a shared background Zipf distribution. Best-first
focused crawls can therefore tell topics apart from the words alone.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "tr", "pl", "st", "gr")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "", "n", "r", "l", "m")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """Background words plus ``topics`` disjoint topic word blocks, each Zipf-distributed."""

    background: tuple[str, ...]
    topic_words: tuple[tuple[str, ...], ...]
    background_cum: tuple[float, ...]
    topic_cum: tuple[tuple[float, ...], ...]
    popular_terms: tuple[str, ...]

    @property
    def topics(self) -> int:
        return len(self.topic_words)

    def topic_name(self, topic: int) -> str:
        """A topic is named by its most frequent word."""
        return self.topic_words[topic][0]

    def sample(self, rng: random.Random, topic: int, n: int, topic_share: float = 0.7) -> list[str]:
        """``n`` words: each from ``topic``'s distribution with probability ``topic_share``, else
        from the background."""
        words, cum = self.topic_words[topic], self.topic_cum[topic]
        bwords, bcum = self.background, self.background_cum
        rand = rng.random
        out = []
        for _ in range(n):
            if rand() < topic_share:
                out.append(words[bisect_right(cum, rand() * cum[-1])])
            else:
                out.append(bwords[bisect_right(bcum, rand() * bcum[-1])])
        return out


# The stopwords of raycrawl.text.stopwords() that the syllable generator can spell (a test keeps
# this list honest; importing scikit-learn here would cost seconds at every start).
_SPELLABLE_STOPWORDS = frozenset(
    ["became", "become", "before", "beside", "done", "fire", "five", "former", "give", "made", "mine", "more", "move", "name", "never", "nine", "none", "same", "several", "side", "since", "sincere", "some", "sometime", "take"])


def _stem_stable(words: list[str]) -> list[str]:
    import Stemmer

    stems = Stemmer.Stemmer("porter").stemWords(words)
    return [w for w, s in zip(words, stems, strict=True) if w == s and w not in _SPELLABLE_STOPWORDS]


def build_vocabulary(seed: int, topics: int = 16, background_size: int = 4000, topic_size: int = 600,
                     exponent: float = 1.05, popular: int = 200) -> Vocabulary:
    """Deterministic vocabulary for ``seed``. Words are unique across background and topics."""
    rng = random.Random(f"vocab:{seed}")
    need = background_size + topics * topic_size
    seen: set[str] = set()
    candidates: list[str] = []
    while len(candidates) < need * 2:
        syl = rng.choice((2, 2, 3, 3, 3, 4))
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syl))
        if w not in seen:
            seen.add(w)
            candidates.append(w)
    words = _stem_stable(candidates)[:need]
    assert len(words) == need, "syllable generator produced too few stem-stable words"
    background = tuple(words[:background_size])
    blocks = tuple(tuple(words[background_size + t * topic_size: background_size + (t + 1) * topic_size])
                   for t in range(topics))
    bcum = tuple(accumulate(1.0 / (r + 1) ** exponent for r in range(background_size)))
    tcum = tuple(accumulate(1.0 / (r + 1) ** exponent for r in range(topic_size)))
    # What users search for: content words of middling frequency (the head of a Zipf distribution
    # is function-word-like), from the background and from every topic. Keyword stuffers repeat them.
    per_topic = max(1, (popular // 2) // topics)
    pop = list(background[20: 20 + popular - per_topic * topics])
    for block in blocks:
        pop.extend(block[3: 3 + per_topic])
    return Vocabulary(background, blocks, bcum, tuple(tcum for _ in range(topics)), tuple(pop))
