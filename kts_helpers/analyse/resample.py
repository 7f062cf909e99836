"""The bootstrap engine: resamples of a series' order statistics, fast and exactly distributed.

Speed: a p99 is decided by the top ~1% of a resample, so resamples are never materialised
whole where that can be avoided, and every path gives *the same distribution* as the naive
bootstrap (the tests check it against scipy/arch and against the naive resampler here):

* i.i.d.: a resample's sorted draws are ``s[floor(n * U_(k))]`` with ``U_(k)`` the order
  statistics of n uniforms (``s`` = sorted data). ``U_(k)`` is Beta(k+1, n-k), and the next
  needed order statistic, given this one, is ``U + (1-U) * Beta(dk, n-k')``. So any set of
  order statistics of a resample costs O(1) draws: exact, for any q.
* circular blocks: only blocks that touch the tail set S (the top K values) matter. The number
  of the m-1 full blocks that touch S is Binomial(m-1, h), their starts are uniform among the
  starts that touch S, the last (short) block is drawn directly; prefix counts over the
  circularly extended tail indicator give each block's tail elements.
* stationary blocks: the resample is a Markov chain (continue w.p. 1-p, else jump to a uniform
  start). It is simulated only at its visits to S: from a fresh start the time spent in blocks
  that die before reaching S is drawn from its exact law (a renewal sequence, tabulated once
  by power-series inversion), the entry point from its exact law, and the walk through a run
  of S and the gap after it with one geometric draw (memorylessness). Chunks of resamples
  run on threads (numpy releases the GIL); chunking never depends on the core count.
  K is chosen so that a resample holds fewer than the needed number of tail elements with
  probability below ~1e-12 (7 standard deviations); the rare resample that does is redrawn
  with the naive resampler (so the total-variation distance to the naive bootstrap is at most
  that probability), and ``Interval.note`` says how many were.
Central quantiles with block methods (tail > n/4) use the naive resampler, chunked.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_CHUNK_ELEMS = 4_000_000  # bound on resample elements held at once by the naive resampler
_Z_TAIL = 7.0  # tail size safety margin, in standard deviations of the tail count

def lerp_quantile(lo_v: np.ndarray, hi_v: np.ndarray, n: int | np.ndarray, q: float) -> np.ndarray:
    """numpy's linear quantile from the two bracketing order statistics (same arithmetic)."""
    h = (n - 1) * q  # numpy 'linear': virtual index (n-1)q, gamma = h - floor(h)
    g = h - np.floor(h)
    diff = hi_v - lo_v
    return np.where(g >= 0.5, hi_v - diff * (1 - g), lo_v + diff * g)


def bracket(n: int, q: float) -> tuple[int, int]:
    h = (n - 1) * q
    lo = min(max(int(math.floor(h)), 0), n - 1)
    return lo, min(lo + 1, n - 1)


# ----------------------------------------------------------------------------- naive resampler

def naive_positions(n: int, r: int, method: str, b: int, rng: np.random.Generator) -> np.ndarray:
    """(r, n) positions of r naive resamples (the reference the fast paths must match)."""
    if method == "iid" or b <= 1:
        return rng.integers(0, n, size=(r, n))
    if method == "circular":
        m = -(-n // b)
        starts = rng.integers(0, n, size=(r, m))
        return ((starts[:, :, None] + np.arange(b)).reshape(r, m * b)[:, :n]) % n
    restart = rng.random((r, n)) < 1.0 / b
    restart[:, 0] = True
    starts = rng.integers(0, n, size=(r, n))
    t = np.arange(n)
    last = np.maximum.accumulate(np.where(restart, t, 0), axis=1)
    return (np.take_along_axis(starts, last, axis=1) + (t - last)) % n


def naive_orders(x: np.ndarray, ks: np.ndarray, r: int, method: str, b: int,
                  rng: np.random.Generator) -> np.ndarray:
    """(r, len(ks)) values at sorted positions ks of r naive resamples, chunked."""
    n = len(x)
    out = np.empty((r, len(ks)))
    step = max(1, _CHUNK_ELEMS // n)
    for i in range(0, r, step):
        c = min(step, r - i)
        vals = x[naive_positions(n, c, method, b, rng)]
        out[i:i + c] = np.partition(vals, ks, axis=1)[:, ks]
    return out


# ----------------------------------------------------------------------------- i.i.d. fast path

def _iid_orders(s: np.ndarray, ks: np.ndarray, r: int, rng: np.random.Generator) -> np.ndarray:
    """Exact joint order statistics of r i.i.d. resamples of sorted ``s`` at positions ks."""
    n = len(s)
    order = np.argsort(ks, kind="stable")
    out = np.empty((r, len(ks)))
    u = np.zeros(r)
    prev = -1
    for j in order:
        k = int(ks[j])
        if k > prev:
            u = u + (1.0 - u) * rng.beta(k - prev, n - k, size=r)
            prev = k
        out[:, j] = s[np.minimum((u * n).astype(np.int64), n - 1)]
    return out


# ----------------------------------------------------------------------------- block fast paths

def _tail_size(rho: np.ndarray, need: int, method: str, b: int) -> int:
    """Tail size K so that fewer than ``need`` tail elements in a resample is a ~7-sigma event."""
    n = len(rho)
    k0 = min(n, need + math.ceil(6 * math.sqrt(need)) + 1)
    ind = (rho >= n - k0).astype(np.float64)
    ind -= ind.mean()
    if method == "stationary":
        lags = min(n - 1, math.ceil(b * math.log(1e6)) + 1)
        w = (1 - 1 / b) ** np.arange(1, lags + 1)
    else:
        lags = min(n - 1, b - 1)
        w = 1 - np.arange(1, lags + 1) / b
    phi = 1.0
    if lags > 0:
        f = np.fft.rfft(ind, 2 * n)
        acov = np.fft.irfft(f * np.conj(f), 2 * n)[: lags + 1]
        if acov[0] > 0:
            phi = 1 + 2 * float(np.sum(w * np.maximum(acov[1:] / acov[0], 0)))
    c = _Z_TAIL * math.sqrt(phi)
    return min(n, math.ceil(((c + math.sqrt(c * c + 4 * need)) / 2) ** 2) + 1)


def _conv(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    size = 1 << (len(a) + len(b) - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:m]


def _series_inverse(a: np.ndarray, n: int) -> np.ndarray:
    """First n coefficients of 1 / A(z) (a[0] == 1), by Newton iteration with FFT products."""
    b = np.ones(1)
    m = 1
    while m < n:
        m = min(2 * m, n)
        ab = _conv(a[:m], b, m)
        nb = np.zeros(m)
        nb[: len(b)] = 2 * b
        b = nb - _conv(b, ab, m)
    return b


class _InverseCdf:
    """Exact inverse-CDF sampling from a sorted CDF: a guide table gives O(1) expected work per draw.

    Bucket j of m holds the first index whose CDF exceeds j/m; a few linear steps finish most
    draws, and the rare draw in a crowded bucket is finished by binary search.
    """

    def __init__(self, cdf: np.ndarray, m: int, rng: np.random.Generator):
        self.cdf, self.m, self.rng = np.append(cdf, np.inf), m, rng
        self.guide = np.searchsorted(cdf, np.arange(m) / m, side="right")

    def __call__(self, size: int) -> np.ndarray:
        u = self.rng.random(size)
        i = self.guide[(u * self.m).astype(np.int64)]
        for _ in range(2):
            i += self.cdf[i] <= u
        bad = np.flatnonzero(self.cdf[i] <= u)
        if bad.size:
            i[bad] = np.searchsorted(self.cdf, u[bad], side="right")
        return i


def _gather_ranks(rho2: np.ndarray, owner: np.ndarray, starts: np.ndarray,
                  lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, rank) of every element of rho2[start:start+len], over all (owner, start, len).

    Most visits hold 0 or 1 element, so the first elements are taken directly and only the
    rest (len >= 2) goes through the slower repeat-based range expansion.
    """
    one = lens > 0
    o1, r1 = owner[one], rho2[starts[one]]
    many = np.flatnonzero(lens > 1)
    if not many.size:
        return o1, r1
    extra = lens[many] - 1
    total = int(extra.sum())
    offs = np.repeat(starts[many].astype(np.int64) + 1 - (np.cumsum(extra) - extra), extra)
    return np.concatenate([o1, np.repeat(owner[many], extra)]), np.concatenate([r1, rho2[offs + np.arange(total)]])


def _ranks_from_counts(owner: np.ndarray, ranks: np.ndarray, r: int, kk: int, top: int,
                       js: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resample, the js-th largest rank (0-based) from (owner, rank) pairs; and which failed."""
    counts = np.bincount(owner.astype(np.int64) * kk + (ranks - (top - kk + 1)), minlength=r * kk).reshape(r, kk)
    cum = np.cumsum(counts[:, ::-1], axis=1, dtype=np.int32)
    out = np.empty((r, len(js)), dtype=np.int64)
    for i, j in enumerate(js):
        out[:, i] = top - np.argmax(cum > j, axis=1)
    return out, cum[:, -1] <= js.max()


def _circular_tail(rho: np.ndarray, kk: int, js: np.ndarray, r: int, b: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = len(rho)
    in_s2 = np.tile(rho >= n - kk, 2)
    tailpos = np.flatnonzero(in_s2)
    rho2t = np.concatenate([rho, rho])[tailpos]
    c2 = np.concatenate([[0], np.cumsum(in_s2)])
    a = np.arange(n)
    m = -(-n // b)
    last_len = n - (m - 1) * b
    hitters = np.flatnonzero(c2[a + b] - c2[a] > 0) if m > 1 else np.zeros(0, np.int64)
    out = np.empty((r, len(js)), dtype=np.int64)
    failed = np.zeros(r, dtype=bool)
    step = max(1, 8_000_000 // kk)
    for i in range(0, r, step):
        rc = min(step, r - i)
        nh = rng.binomial(m - 1, len(hitters) / n, size=rc) if m > 1 else np.zeros(rc, np.int64)
        st = hitters[rng.integers(0, max(len(hitters), 1), size=int(nh.sum()))] if nh.sum() else \
            np.zeros(0, np.int64)
        owner = np.repeat(np.arange(rc), nh)
        lens = np.full(len(st), b)
        last = rng.integers(0, n, size=rc)
        st = np.concatenate([st, last])
        owner = np.concatenate([owner, np.arange(rc)])
        lens = np.concatenate([lens, np.full(rc, last_len)])
        first, cnt = c2[st], c2[st + lens] - c2[st]
        own, ranks = _gather_ranks(rho2t, owner, first, cnt)
        out[i:i + rc], failed[i:i + rc] = _ranks_from_counts(own, ranks, rc, kk, n - 1, js)
    return out, failed


def _stationary_tail(rho: np.ndarray, kk: int, js: np.ndarray, r: int, b: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stationary bootstrap simulated only at its visits to the tail set S (see module doc)."""
    n = len(rho)
    p = 1.0 / b
    in_s2 = np.tile(rho >= n - kk, 2)
    idx2 = np.arange(2 * n)
    big = 4 * n
    nxt_s = np.minimum.accumulate(np.where(in_s2, idx2, big)[::-1])[::-1]
    nxt_o = np.minimum.accumulate(np.where(~in_s2, idx2, big)[::-1])[::-1]
    a = np.arange(n)
    d = nxt_s[:n] - a  # steps from a to the next tail element (0 inside S)
    rem = (nxt_o[:n] - a).astype(np.int32)  # at a tail element: tail elements left in its run
    gap = d[(a + rem) % n].astype(np.int32)  # at a tail element: non-tail gap after its run
    w = (1.0 - p) ** d  # a fresh block started at a reaches S with probability (1-p)^d(a)
    eta = float(w.mean())
    cdf_a = np.cumsum(w)
    cdf_a /= cdf_a[-1]
    maxd = int(d.max())
    surv = (n - np.cumsum(np.bincount(d, minlength=maxd + 1)))[:maxd] / n  # P(d >= j), j = 1..maxd
    g = p * (1.0 - p) ** np.arange(maxd) * surv  # a fresh block dies after exactly j steps, before S
    poly = np.zeros(n)
    poly[0] = 1.0
    poly[1:maxd + 1] -= g[: n - 1]
    u = np.clip(_series_inverse(poly, n), 0.0, None)  # renewal sequence: failed blocks sum to m
    cdf_f = np.cumsum(eta * u)
    entry = ((a + d) % n).astype(np.int32)
    d32 = d.astype(np.int32)
    rho2 = np.concatenate([rho, rho])
    inv_lam = -1.0 / math.log1p(-p)  # C = floor(E / -log(1-p)), E ~ Exp(1), is exactly Geometric: P(C >= k) = (1-p)^k

    def run(rc: int, crng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        draw_f = _InverseCdf(cdf_f, n, crng)  # steps lost before reaching S; n means "never"
        draw_a = _InverseCdf(cdf_a, n, crng)  # start of the block that reaches S
        owner = np.arange(rc, dtype=np.int32)
        t = np.zeros(rc, dtype=np.int32)
        pos = np.zeros(rc, dtype=np.int32)
        fresh = np.ones(rc, dtype=bool)
        rec_o, rec_p, rec_v = [], [], []
        while owner.size:
            size = owner.size
            if fresh.any():  # lockstep over the chunk: draw for all, keep where fresh
                st = draw_a(size)
                t = np.where(fresh, t + draw_f(size) + d32[st], t)
                pos = np.where(fresh, entry[st], pos)
            c = (crng.standard_exponential(size) * inv_lam).astype(np.int32)  # continuations
            re, ge = rem[pos], gap[pos]
            v = np.minimum(c + 1, re)
            np.minimum(v, n - t, out=v)
            np.maximum(v, 0, out=v)
            rec_o.append(owner)
            rec_p.append(pos)
            rec_v.append(v)
            fresh = c < re + ge
            t = np.where(fresh, t + c + 1, t + re + ge)
            pos = np.where(fresh, pos, pos + re + ge)
            pos[pos >= n] -= n
            alive = t < n
            if not alive.all():
                owner, t, pos, fresh = owner[alive], t[alive], pos[alive], fresh[alive]
        owner, starts, lens = (np.concatenate(z) for z in (rec_o, rec_p, rec_v))
        own, ranks = _gather_ranks(rho2, owner, starts, lens)
        return _ranks_from_counts(own, ranks, rc, kk, n - 1, js)

    return _run_chunks(run, r, kk, rng)


def _run_chunks(run: Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray]], r: int, kk: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split r resamples into chunks (bounded memory), each with its own spawned generator, run on threads.

    Chunk boundaries depend only on r and kk, never on the core count, so a seed gives the same
    result on every machine; numpy releases the GIL in the bulk work, so chunks overlap.
    """
    step = max(1, min(16384, 16_000_000 // kk, -(-r // 2) if r >= 4096 else r))
    sizes = [min(step, r - i) for i in range(0, r, step)]
    rngs = rng.spawn(len(sizes))
    workers = min(len(sizes), os.cpu_count() or 1, 4)
    if workers > 1:
        with ThreadPoolExecutor(workers) as ex:
            parts = list(ex.map(run, sizes, rngs))
    else:
        parts = [run(sz, g) for sz, g in zip(sizes, rngs, strict=True)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def boot_orders(x: np.ndarray, ks: Sequence[int], r: int, method: str, b: int,
                 rng: np.random.Generator, engine: str = "auto") -> tuple[np.ndarray, int]:
    """(r, len(ks)) values at sorted positions ks of r bootstrap resamples, + redrawn count.

    ``engine``: "auto" (fast exact paths where they apply), "naive" (materialise every
    resample; the reference), or "tail" (force the block tail path; for tests).
    """
    n = len(x)
    ks = np.asarray(ks, dtype=np.int64)
    if engine == "naive":
        return naive_orders(x, ks, r, method, b, rng), 0
    order = np.argsort(x, kind="stable")
    s = x[order]
    if method == "iid" or b <= 1:  # a block bootstrap with blocks of 1 *is* the i.i.d. bootstrap
        return _iid_orders(s, ks, r, rng), 0
    upper = bool(np.all(ks >= (n - 1) / 2))
    lower = bool(np.all(ks <= (n - 1) / 2))
    if not (upper or lower):
        return naive_orders(x, ks, r, method, b, rng), 0
    rho = np.empty(n, dtype=np.int64)
    rho[order] = np.arange(n)
    kt = ks
    if not upper:  # mirror: the k-th smallest is n-1 - the (n-1-k)-th smallest of mirrored ranks
        rho, kt = n - 1 - rho, n - 1 - ks
    js = n - 1 - kt  # j-th largest, 0-based
    kk = _tail_size(rho, int(js.max()) + 1, method, b)
    if kk > n // 4 and engine != "tail" or kk >= n:
        return naive_orders(x, ks, r, method, b, rng), 0
    fn = _stationary_tail if method == "stationary" else _circular_tail
    ranks, failed = fn(rho, kk, js, r, b, rng)
    if not upper:
        ranks = n - 1 - ranks
    vals = s[ranks]
    nf = int(failed.sum())
    if nf:
        vals[failed] = naive_orders(x, ks, nf, method, b, rng)
    return vals, nf


def boot_quantiles(x: np.ndarray, q: float, r: int, method: str, b: int, rng: np.random.Generator,
                    engine: str = "auto") -> tuple[np.ndarray, int]:
    lo, hi = bracket(len(x), q)
    v, nf = boot_orders(x, [lo, hi], r, method, b, rng, engine)
    return lerp_quantile(v[:, 0], v[:, 1], len(x), q), nf


def pct_interval(dist: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(dist, [alpha, 1 - alpha])
    return float(lo), float(hi)


def redraw_note(nf: int) -> str:
    return f"{nf} resample(s) had too few tail elements and were redrawn naively" if nf else ""


def join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def boot_means(a: np.ndarray, r: int, method: str, b: int, rng: np.random.Generator) -> np.ndarray:
    n = len(a)
    out = np.empty(r)
    step = max(1, _CHUNK_ELEMS // n)
    for i in range(0, r, step):
        c = min(step, r - i)
        out[i:i + c] = a[naive_positions(n, c, method, b, rng)].mean(axis=1)
    return out


def pooled_quantiles(runs: list[np.ndarray], q: float, r: int, method: str, blocks: list[int],
                      rng: np.random.Generator) -> np.ndarray:
    """Pick runs with replacement, block-resample inside each pick, take the pooled q-quantile."""
    m = len(runs)
    lens = np.array([len(x) for x in runs])
    same = bool(np.all(lens == lens[0]))
    out = np.empty(r)
    step = max(1, _CHUNK_ELEMS // (m * int(lens.max())))
    for i in range(0, r, step):
        rc = min(step, r - i)
        choice = rng.integers(0, m, size=(rc, m))
        clen = lens[choice]
        offs = np.cumsum(clen, axis=1) - clen
        tot = clen.sum(axis=1)
        buf = np.full((rc, int(tot.max())), np.inf)
        for c in range(m):
            rr, jj = np.nonzero(choice == c)
            if rr.size:
                vals = runs[c][naive_positions(lens[c], rr.size, method, blocks[c], rng)]
                buf[rr[:, None], offs[rr, jj][:, None] + np.arange(lens[c])] = vals
        if same:
            lo, hi = bracket(int(tot[0]), q)
            part = np.partition(buf, [lo, hi], axis=1)
            out[i:i + rc] = lerp_quantile(part[:, lo], part[:, hi], int(tot[0]), q)
        else:
            srt = np.sort(buf, axis=1)
            h = (tot - 1) * q
            lo = np.clip(np.floor(h).astype(np.int64), 0, tot - 1)
            hi = np.minimum(lo + 1, tot - 1)
            out[i:i + rc] = lerp_quantile(np.take_along_axis(srt, lo[:, None], 1)[:, 0],
                                           np.take_along_axis(srt, hi[:, None], 1)[:, 0], tot, q)
    return out


