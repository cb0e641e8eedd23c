"""Numba kernels decoding the WebGraph BV format (Boldi–Vigna), used by ``storage.bvgraph``.

One node's record, with WebGraph's default codes (``compressionflags`` empty)::

    outdegree d                      γ
    if d > 0:
      reference r (0 = none)         unary            (only if windowsize > 0)
      if r > 0:
        block count b                γ
        blocks                       γ; blocks after the first are stored minus 1
                                     (even-indexed blocks copy, odd-indexed skip the
                                     reference's successors; if b is even the tail is copied)
      if d > copied and minintervallength > 0:
        interval count i             γ
        first left extreme           γ of int2nat(left - x); later ones γ of gap - 1 from the
                                     previous interval's end
        lengths                      γ of length - minintervallength
      residuals (the rest)           first: ζk of int2nat(res - x); then ζk of gap - 1

The successor list is the sorted merge of copied, interval and residual successors.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from raycrawl.storage.codes import nat2int, read_gamma, read_unary, read_zeta


@njit(cache=True)
def read_header(words, pos, window):
    """``(outdegree, reference, pos after them)`` of the record starting at ``pos``."""
    d, pos = read_gamma(words, pos)
    r = 0
    if d > 0 and window > 0:
        r, pos = read_unary(words, pos)
    return d, r, pos


@njit(cache=True)
def decode_node_body(words, pos, x, d, use_ref, ref, n, min_interval, zk, scratch, out):
    """Decode node ``x``'s successors (after its header) into ``out[:d]``; see module doc.

    ``use_ref`` says whether the header had a reference, ``ref`` is then its successor list.
    ``scratch`` needs ``d`` slots. Returns the bit position after the record."""
    nc = 0
    if use_ref:
        bc, pos = read_gamma(words, pos)
        idx = 0
        nref = ref.shape[0]
        for i in range(bc):
            b, pos = read_gamma(words, pos)
            if i > 0:
                b += 1
            if idx + b > nref:
                raise ValueError("graph corrupt: copy block past the reference list")
            if i % 2 == 0:
                if nc + b > d:
                    raise ValueError("graph corrupt: more copied successors than the outdegree")
                for j in range(b):
                    scratch[nc + j] = ref[idx + j]
                nc += b
            idx += b
        if bc % 2 == 0:
            rest = nref - idx
            if nc + rest > d:
                raise ValueError("graph corrupt: more copied successors than the outdegree")
            for j in range(rest):
                scratch[nc + j] = ref[idx + j]
            nc += rest
    extra = d - nc
    ni = 0
    if extra > 0 and min_interval > 0:
        ic, pos = read_gamma(words, pos)
        prev = 0
        for i in range(ic):
            g, pos = read_gamma(words, pos)
            if i == 0:
                left = nat2int(g) + x
            else:
                left = prev + 1 + g
            ln, pos = read_gamma(words, pos)
            ln += min_interval
            if nc + ni + ln > d or left < 0 or left + ln > n:
                raise ValueError("graph corrupt: interval out of range")
            for j in range(ln):
                scratch[nc + ni + j] = left + j
            ni += ln
            prev = left + ln
    nr = d - nc - ni
    prev = 0
    base = nc + ni
    for i in range(nr):
        g, pos = read_zeta(words, pos, zk)
        if i == 0:
            prev = nat2int(g) + x
        else:
            prev = prev + g + 1
        if prev < 0 or prev >= n:
            raise ValueError("graph corrupt: successor out of range")
        scratch[base + i] = prev
    # Three-way merge of the sorted runs [0,nc), [nc,nc+ni), [nc+ni,d).
    a, ae = 0, nc
    b, be = nc, nc + ni
    c, ce = nc + ni, d
    big = np.int64(1) << 62
    for k in range(d):
        va = scratch[a] if a < ae else big
        vb = scratch[b] if b < be else big
        vc = scratch[c] if c < ce else big
        if va <= vb and va <= vc:
            out[k] = va
            a += 1
        elif vb <= vc:
            out[k] = vb
            b += 1
        else:
            out[k] = vc
            c += 1
    return pos


@njit(cache=True)
def decode_all(words, n, m, window, min_interval, zk, limit_bits):
    """Sequentially decode the whole graph into CSR ``(indptr int64, indices int32)`` plus the
    bit offset of every record.

    A reference is the slice of ``indices`` already decoded, so nothing is decoded twice."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(m, dtype=np.int32)
    scratch = np.empty(max(n, 1), dtype=np.int64)
    tmp = np.empty(max(n, 1), dtype=np.int64)
    empty = np.empty(0, dtype=np.int32)
    offsets = np.empty(n, dtype=np.int64)
    pos = np.int64(0)  # not literal 0 (storage/codes.py)
    for x in range(n):
        offsets[x] = pos
        d, r, pos = read_header(words, pos, window)
        start = indptr[x]
        if d > n or start + d > m:
            raise ValueError("graph corrupt: more arcs than the properties declare")
        if r > x or r > window:
            raise ValueError("graph corrupt: reference outside the window")
        if r > 0:
            ref = indices[indptr[x - r] : indptr[x - r + 1]]
        else:
            ref = empty
        if d > 0:
            pos = decode_node_body(words, pos, x, d, r > 0, ref, n, min_interval, zk, scratch, tmp)
            for j in range(d):
                indices[start + j] = tmp[j]
        indptr[x + 1] = start + d
        if pos > limit_bits:
            raise ValueError("graph truncated: records run past the end of the .graph file")
    if indptr[n] != m:
        raise ValueError("graph corrupt: fewer arcs than the properties declare")
    return indptr, indices, offsets


@njit(cache=True)
def decode_successors(words, offsets, v, n, window, min_interval, zk, limit_bits):
    """Successors of ``v`` by random access: follow the reference chain back, then decode
    forward from its start (the chain is at most ``maxrefcount`` long)."""
    chain = np.empty(64, dtype=np.int64)
    nchain = 0
    cur = v
    while True:
        if nchain == chain.shape[0]:
            bigger = np.empty(2 * nchain, dtype=np.int64)
            bigger[:nchain] = chain
            chain = bigger
        chain[nchain] = cur
        nchain += 1
        d, r, _ = read_header(words, offsets[cur], window)
        if d == 0 or r == 0:
            break
        if r > cur:
            raise ValueError("graph corrupt: reference before node 0")
        cur -= r
    # The reference travels as int32, as in decode_all: one compiled decode_node_body for both.
    ref = np.empty(0, dtype=np.int32)
    out = ref.astype(np.int64)
    for i in range(nchain - 1, -1, -1):
        x = chain[i]
        if offsets[x] > limit_bits:
            raise ValueError("graph truncated: offset past the end of the .graph file")
        d, r, pos = read_header(words, offsets[x], window)
        if d > n:
            raise ValueError("graph corrupt: outdegree larger than the node count")
        out = np.empty(d, dtype=np.int64)
        if d > 0:
            scratch = np.empty(d, dtype=np.int64)
            pos = decode_node_body(words, pos, x, d, r > 0, ref, n, min_interval, zk, scratch, out)
        if i > 0:
            ref = out.astype(np.int32)
    return out


@njit(cache=True)
def outdegrees_at(words, offsets, n):
    """Outdegree of every node, read from the first code of each record."""
    out = np.empty(n, dtype=np.int64)
    for x in range(n):
        out[x], _ = read_gamma(words, offsets[x])
    return out
