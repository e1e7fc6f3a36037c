"""Earley recognition over bytes: numba kernels over flat arrays (no Python objects inside).

Items are int64 ``origin << 32 | state`` (a state of a rule automaton, see compile.py).
Set p is the row ``items[set_start[p]:set_start[p+1]]``; sets 0..n-1 are committed
(``meta[N_SETS] = n``); popping sets is moving that count back (checkpoint/restore is one
integer). Set p holds the items after p input bytes.

Per committed set p, *waiter groups* index, per rule B that some item of p waits on, the
items to add when B completes with origin p: ``grp_*[grp_start[p]:grp_start[p+1]]``, each
group a run of entries ``ent_target/ent_origin``. A completion of B from origin o < p looks
up B's group in set o and adds its entries.

Nullable rules: Aycock–Horspool — predicting a nullable B also advances the predicting item
over B, so completions with origin == p are never needed.

Leo's optimization: when set p has exactly one item waiting on B and the advanced item is
TAIL (completes its rule A and does nothing else), the group of B stores instead the
topmost item of the deterministic reduction chain: A's group in set o (the waiter's
origin) if that is itself such a chain, else the advanced item. Right recursion then adds
O(1) items per byte instead of one completed item per open level.

Counters (``counters[...]``, cumulative; callers subtract):
  C_ITEMS       items added to a set (all kinds)
  C_PREDICT     items added by prediction (rule start states)
  C_COMPLETE    items added by completion (including nullable advances)
  C_SCAN        items added by scanning a byte
  C_TRIE        trie nodes visited by a mask walk (bytes pushed)
  C_LEO         completions resolved through a Leo chain entry
  C_SETS        Earley sets built
Kernel status: ALIVE (1), ALIVE|ACCEPT (3), DEAD (0: no item, nothing committed),
OVERFLOW (-1: a capacity ran out, nothing committed; grow and retry).
"""

from __future__ import annotations

import numpy as np

from .compile import FINAL, HAS_OUT, REP_NULLABLE, REP_UNBOUNDED, REP_W, TAIL
from .jit import kernel
from .packed import fetch_add, pack_width, packed_at, slot1, view1

# ---- state tuple layout (see EarleyState in chart.py)
I_ITEMS, I_SET_START, I_GRP_START, I_GRP_RULE, I_GRP_FIRST, I_GRP_LEN, I_GRP_LEO = range(7)
I_ENT_START, I_ENT_TARGET, I_ENT_ORIGIN, I_HKEYS, I_HGEN, I_RGEN, I_RCNT, I_RPOS = range(7, 15)
I_TOUCHED, I_SET_FLAG, I_META, I_COUNTERS = range(15, 19)
I_TRANS, I_KLEN, I_MKEYS, I_MGEN, I_MVAL = range(19, 24)
I_CANON, I_MC_KEY, I_MC_MASK, I_MC_SCRATCH, I_IKEY, I_IVAL, I_ISTART, I_IPOOL = range(24, 32)
I_GCODE = 32

N_SETS, GEN, ACC_FLAG, W_ROOT, W_TOP, MGEN, N_IDS, W_NAMED = range(8)
# a mask walk names its sets by content (memo_push) once it has built more than NAME_AFTER
# of them holding NAME_ITEMS items or more in all: naming pays where items pile up (an
# ambiguous repetition: SMILES' walk sets hold ~100 items each), not in a walk of small
# sets (after a JSON key's quote: ~3 items each; naming them was ~20% of the mask)
NAME_AFTER = 8
NAME_ITEMS = 96
C_ITEMS, C_PREDICT, C_COMPLETE, C_SCAN, C_TRIE, C_LEO, C_SETS = range(7)
N_COUNTERS = 8

DEAD, ALIVE, ACCEPT, OVERFLOW = 0, 1, 2, -1
MASK32 = (1 << 32) - 1
# memo_push results besides a set index (>= 0)
M_DEAD, M_OVERFLOW, M_UNKNOWN = -1, -2, -3


@kernel(inline="always")
def _hash(key):
    h = key * np.int64(-7046029254386353131)
    return h ^ (h >> np.int64(29))


@kernel
def hash_key(key):
    """``_hash`` for Python callers (tables the kernels probe, e.g. tokens._table_put)."""
    return _hash(np.int64(key))


@kernel(inline="always")
def _insert(hkeys, hgen, key, gen):
    """True when ``key`` was not yet in the set under construction (generation ``gen``)."""
    mask = len(hkeys) - 1
    h = _hash(key) & mask
    while True:
        if hgen[h] != gen:
            hgen[h] = gen
            hkeys[h] = key
            return True
        if hkeys[h] == key:
            return False
        h = (h + 1) & mask


# ---- virtual states (counted repetitions, compile.py): ids >= len(flags), one per count,
# described by their row of ``reps`` (G[8]): base, m, cap, flags, X's rule, R's rule


@kernel(inline="always")
def _vrow(reps, q):
    """The row (its first int's index) of the counted repetition of virtual state q."""
    j = 0
    while q > reps[j] + reps[j + 2]:
        j += REP_W
    return j


@kernel(inline="always")
def _vedge(reps, q):
    """Virtual state q's one rule edge as (X, target): count c -> c + 1 below the cap, the
    cap to itself when unbounded; (-1, -1) when it has none."""
    j = _vrow(reps, q)
    b = reps[j + 4]
    if b >= 0:
        if q - reps[j] < reps[j + 2]:
            return b, q + 1
        if (reps[j + 3] & REP_UNBOUNDED) != 0:
            return b, q
    return -1, -1


@kernel(inline="always")
def _vflags(reps, q):
    """FINAL (count >= m, or X derives ε), HAS_OUT (an edge), TAIL of virtual state q."""
    j = _vrow(reps, q)
    f = 0
    if q - reps[j] >= reps[j + 1] or (reps[j + 3] & REP_NULLABLE) != 0:
        f = FINAL
    b, t = _vedge(reps, q)
    if b >= 0:
        f |= HAS_OUT
    elif f != 0:
        f |= TAIL
    return f


@kernel(inline="always")
def _edges(G, q):
    """The rule edges of any state q as (k0, k1, vb, vt): ``ref_rule/ref_target[k0:k1]``
    for a real one (vb = -1); for a virtual one k1 - k0 is 1 or 0 and its edge is (vb, vt)."""
    if q < len(G[4]):
        return G[1][q], G[1][q + 1], -1, -1
    vb, vt = _vedge(G[8], q)
    return 0, (1 if vb >= 0 else 0), vb, vt


@kernel(inline="always")
def _sflags(G, q):
    """flags of any state q, real or virtual."""
    flags = G[4]
    if q < len(flags):
        return flags[q]
    return _vflags(G[8], q)


@kernel(inline="always")
def _srule(G, q):
    """The rule of any state q, real or virtual."""
    state_rule = G[5]
    if q < len(state_rule):
        return state_rule[q]
    reps = G[8]
    return reps[_vrow(reps, q) + 5]


@kernel(helper=True)
def _closure(G, S, p, begin, end, gen, acc):
    """Predict/complete over items[begin:end) of set p until closed; return the new end,
    or -1 on overflow. Sets meta[ACC_FLAG] when an accepting item is present: (acc, 0), or
    any FINAL item with origin 0 when acc < 0."""
    byte_next, ref_start, ref_rule, ref_target, flags = G[0], G[1], G[2], G[3], G[4]
    state_rule, rule_start, rule_nullable, reps = G[5], G[6], G[7], G[8]
    nreal = len(flags)
    items = S[I_ITEMS]
    grp_start = S[I_GRP_START]
    grp_rule = S[I_GRP_RULE]
    grp_first = S[I_GRP_FIRST]
    grp_len = S[I_GRP_LEN]
    grp_leo = S[I_GRP_LEO]
    ent_target = S[I_ENT_TARGET]
    ent_origin = S[I_ENT_ORIGIN]
    hkeys = S[I_HKEYS]
    hgen = S[I_HGEN]
    meta = S[I_META]
    cnt = S[I_COUNTERS]
    cap = len(items)
    half = len(hkeys) >> 1
    pk = np.int64(p) << 32
    i = begin
    while i < end:
        it = items[i]
        q = it & MASK32
        o = it >> 32
        fq = flags[q] if q < nreal else _vflags(reps, q)
        k0, k1, vb, vt = _edges(G, q)  # a count of a counted repetition: one edge, never over ε
        if (fq & FINAL) != 0 and o == 0 and (acc < 0 or q == acc):
            meta[ACC_FLAG] = 1
        for k in range(k0, k1):
            b = vb if vb >= 0 else ref_rule[k]
            key = pk | rule_start[b]
            if _insert(hkeys, hgen, key, gen):
                if end >= cap:
                    return -1
                items[end] = key
                end += 1
                cnt[C_ITEMS] += 1
                cnt[C_PREDICT] += 1
            if vb < 0 and rule_nullable[b] != 0:
                key = (o << 32) | ref_target[k]
                if _insert(hkeys, hgen, key, gen):
                    if end >= cap:
                        return -1
                    items[end] = key
                    end += 1
                    cnt[C_ITEMS] += 1
                    cnt[C_COMPLETE] += 1
        if (fq & FINAL) != 0 and o < p:
            r = state_rule[q] if q < nreal else reps[_vrow(reps, q) + 5]
            for g in range(grp_start[o], grp_start[o + 1]):
                if grp_rule[g] == r:
                    if grp_leo[g] == 2:
                        cnt[C_LEO] += 1
                    for e in range(grp_first[g], grp_first[g] + grp_len[g]):
                        key = (np.int64(ent_origin[e]) << 32) | ent_target[e]
                        if _insert(hkeys, hgen, key, gen):
                            if end >= cap:
                                return -1
                            items[end] = key
                            end += 1
                            cnt[C_ITEMS] += 1
                            cnt[C_COMPLETE] += 1
                    break
        if end - begin > half:
            return -1
        i += 1
    return end


@kernel(helper=True)
def _finalize(G, S, p, begin, end, gen):
    """Build set p's waiter groups (with Leo chain entries); False on overflow."""
    byte_next, ref_start, ref_rule, ref_target, flags = G[0], G[1], G[2], G[3], G[4]
    state_rule, rule_start, rule_nullable, reps = G[5], G[6], G[7], G[8]
    items = S[I_ITEMS]
    grp_start = S[I_GRP_START]
    grp_rule = S[I_GRP_RULE]
    grp_first = S[I_GRP_FIRST]
    grp_len = S[I_GRP_LEN]
    grp_leo = S[I_GRP_LEO]
    ent_start = S[I_ENT_START]
    ent_target = S[I_ENT_TARGET]
    ent_origin = S[I_ENT_ORIGIN]
    rgen = S[I_RGEN]
    rcnt = S[I_RCNT]
    rpos = S[I_RPOS]
    touched = S[I_TOUCHED]
    nt = 0
    total = 0
    for i in range(begin, end):
        k0, k1, vb, vt = _edges(G, items[i] & MASK32)
        for k in range(k0, k1):
            b = vb if vb >= 0 else ref_rule[k]
            if rgen[b] != gen:
                rgen[b] = gen
                rcnt[b] = 0
                touched[nt] = b
                nt += 1
            rcnt[b] += 1
            total += 1
    g0 = grp_start[p]
    e0 = ent_start[p]
    if g0 + nt > len(grp_rule) or e0 + total > len(ent_target):
        return False
    pos = e0
    for j in range(nt):
        b = touched[j]
        g = g0 + j
        grp_rule[g] = b
        grp_first[g] = pos
        grp_len[g] = 0
        rpos[b] = g
        pos += rcnt[b]
    for i in range(begin, end):
        it = items[i]
        o = it >> 32
        k0, k1, vb, vt = _edges(G, it & MASK32)
        for k in range(k0, k1):
            g = rpos[vb if vb >= 0 else ref_rule[k]]
            e = grp_first[g] + grp_len[g]
            ent_target[e] = vt if vb >= 0 else ref_target[k]
            ent_origin[e] = o
            grp_len[g] += 1
    for j in range(nt):
        g = g0 + j
        grp_leo[g] = 0
        if grp_len[g] == 1:
            e = grp_first[g]
            t = ent_target[e]
            o = ent_origin[e]
            if (_sflags(G, t) & TAIL) != 0:
                grp_leo[g] = 1  # a unique waiter whose advance is a completed tail item
                if o < p:
                    a = _srule(G, t)
                    for g2 in range(grp_start[o], grp_start[o + 1]):
                        if grp_rule[g2] == a:
                            if grp_leo[g2] != 0:
                                e2 = grp_first[g2]
                                ent_target[e] = ent_target[e2]
                                ent_origin[e] = ent_origin[e2]
                                grp_leo[g] = 2  # chained: the entry is the topmost item
                            break
    grp_start[p + 1] = g0 + nt
    ent_start[p + 1] = pos
    return True


@kernel(helper=True)
def _commit(G, S, p, begin, end, gen, acc):
    """Close and finalize set p (items[begin:end) seeded); commit it. Returns a status."""
    meta = S[I_META]
    meta[ACC_FLAG] = 0
    end = _closure(G, S, p, begin, end, gen, acc)
    if end < 0:
        return OVERFLOW
    if not _finalize(G, S, p, begin, end, gen):
        return OVERFLOW
    S[I_SET_START][p + 1] = end
    S[I_SET_FLAG][p] = meta[ACC_FLAG]
    meta[N_SETS] = p + 1
    S[I_COUNTERS][C_SETS] += 1
    return ALIVE | (ACCEPT if meta[ACC_FLAG] != 0 else 0)


@kernel(inline="always")
def _origin_code(G, S, o, r, p):
    """The origin o of an item of rule r in set p, as content: 0 = the set itself (p),
    1 = set 0 (the accept item's origin stays recognisable), else the code of o's waiter
    group for r, + 2 (an item (q, o) reads nothing of o but that group: completions and
    Leo chains of its rule); -1: not named."""
    if o == p:
        return np.int64(0)
    if o == 0:
        return np.int64(1)
    grp_start = S[I_GRP_START]
    grp_rule = S[I_GRP_RULE]
    gcode = S[I_GCODE]
    for g in range(grp_start[o], grp_start[o + 1]):
        if grp_rule[g] == r:
            c = gcode[g]
            if c < 0:
                return np.int64(-1)
            return c + 2
    return np.int64(-1)


@kernel(helper=True)
def _intern(S, n):
    """The id of the int64 sequence ``S[I_MC_SCRATCH][:n]`` in the chart's table of
    interned sequences (equal sequences, equal ids; compared in full); -2 on overflow."""
    scratch = S[I_MC_SCRATCH]
    h = _kernel_hash(scratch, 0, n)
    ikey = S[I_IKEY]
    ival = S[I_IVAL]
    istart = S[I_ISTART]
    ipool = S[I_IPOOL]
    hm = len(ikey) - 1
    k = _hash(h) & hm
    while ival[k] >= 0:
        if ikey[k] == h:
            c = ival[k]
            a = istart[c]
            if istart[c + 1] - a == n:
                same = True
                for x in range(n):
                    if ipool[a + x] != scratch[x]:
                        same = False
                        break
                if same:
                    return c
        k = (k + 1) & hm
    meta = S[I_META]
    c = meta[N_IDS]
    if c + 2 > len(istart) or istart[c] + n > len(ipool) or 2 * (c + 1) > len(ikey):
        return -2
    a = istart[c]
    for x in range(n):
        ipool[a + x] = scratch[x]
    istart[c + 1] = a + n
    ikey[k] = h
    ival[k] = c
    meta[N_IDS] = c + 1
    return c


@kernel(helper=True)
def _dedupe(a, begin, end):
    """Sort a[begin:end) and drop repeats; returns the new end."""
    _sort_range(a, begin, end)
    if end - begin < 2:
        return end
    w = begin + 1
    for i in range(begin + 1, end):
        if a[i] != a[w - 1]:
            a[w] = a[i]
            w += 1
    return w


@kernel(helper=True)
def _kernel_key(G, S, p, lo, n):
    """The content id of the set p whose kernel (the items scanned into it, the closure's
    seed) is ``items[lo:lo+n]``: the interned sorted distinct ``origin code << 32 | state``
    (_origin_code). A set is its kernel closed, and the closure reads the origins only
    through their codes, so equal ids mean sets that behave alike in every future (same
    masks, same successors' ids). -1 when not named (an origin not named, too many items),
    -2 on overflow."""
    state_rule = G[5]
    scratch = S[I_MC_SCRATCH]
    items = S[I_ITEMS]
    if n + 1 > len(scratch):
        return np.int64(-1)
    scratch[0] = -2  # tag: a kernel (group sequences start with -1 or -3)
    for i in range(n):
        it = items[lo + i]
        q = it & MASK32
        c = _origin_code(G, S, it >> 32, _srule(G, q), p)
        if c < 0:
            return np.int64(-1)
        scratch[i + 1] = (c << 32) | q
    k = _dedupe(scratch, 1, n + 1)
    return np.int64(_intern(S, k))


@kernel(inline="always")
def _entry_code(G, S, e, p):
    """Waiter entry e of set p as ``target << 24 | origin code`` (0 = p itself); -1 when
    not named or a field is too wide."""
    t = np.int64(S[I_ENT_TARGET][e])
    c = _origin_code(G, S, S[I_ENT_ORIGIN][e], _srule(G, t), p)
    if c < 0 or c >= (1 << 24) or t >= (1 << 22):
        return np.int64(-1)
    return (t << 24) | c


@kernel(helper=True)
def _canonize(G, S, p, kid):
    """Name set p by content: ``canon[p]`` = ``kid``, its kernel's id (_kernel_key), and
    ``gcode[g]`` for each waiter group g of p (rule B: the items to add when B completes
    from p) = the code of what an item (q, p) of rule B reads of p: the interned sorted
    distinct entries ``leo flag | target | origin code``. An entry whose origin is p itself
    (a waiter predicted in p) stands for an item that reads p's other groups in turn, so
    such a group is coded as (all of p's groups, entries coded likewise with p itself as
    0, B): a finite description of everything later sets can read from p. Equal codes
    are a bisimulation (by induction on the sets, coinduction through p's own entries):
    items ``(q, o)``, ``(q, o')`` whose groups for q's rule have equal codes behave alike
    in every future, and so do sets with equal kernel ids. -1: not named (a field too
    wide, an origin not named, too many entries). False on overflow."""
    S[I_CANON][p] = kid
    scratch = S[I_MC_SCRATCH]
    grp_start = S[I_GRP_START]
    grp_rule = S[I_GRP_RULE]
    grp_first = S[I_GRP_FIRST]
    grp_len = S[I_GRP_LEN]
    grp_leo = S[I_GRP_LEO]
    gcode = S[I_GCODE]
    ent_origin = S[I_ENT_ORIGIN]
    g0 = grp_start[p]
    g1 = grp_start[p + 1]
    whole = np.int64(-1)  # the id of all of p's groups, when some group refers to p
    for e in range(grp_first[g0] if g1 > g0 else 0, grp_first[g1 - 1] + grp_len[g1 - 1] if g1 > g0 else 0):
        if ent_origin[e] == p:
            whole = np.int64(-2)
            break
    if whole == -2:
        n = 1
        scratch[0] = -4  # tag: a whole set's groups
        for g in range(g0, g1):
            b = np.int64(grp_rule[g])
            if b >= (1 << 15) or n + grp_len[g] > len(scratch):
                whole = -1
                break
            head = (b << 48) | (np.int64(grp_leo[g]) << 46)
            for e in range(grp_first[g], grp_first[g] + grp_len[g]):
                c = _entry_code(G, S, e, p)
                if c < 0:
                    whole = -1
                    break
                scratch[n] = head | c
                n += 1
            if whole == -1:
                break
        if whole == -2:
            whole = _intern(S, _dedupe(scratch, 1, n))
            if whole == -2:
                return False
    for g in range(g0, g1):
        head = np.int64(grp_leo[g]) << 46
        n = 1
        scratch[0] = -1  # tag: one group's entries
        code = np.int64(0)
        for e in range(grp_first[g], grp_first[g] + grp_len[g]):
            if ent_origin[e] == p:
                code = -3  # refers to p: coded by the whole set
                break
            c = _entry_code(G, S, e, p)
            if c < 0 or n >= len(scratch):
                code = -1
                break
            scratch[n] = head | c
            n += 1
        if code == -3:
            if whole < 0:
                code = -1
            else:
                scratch[0] = -3  # tag: (whole set, rule)
                scratch[1] = whole
                scratch[2] = grp_rule[g]
                code = _intern(S, 3)
        elif code == 0:
            code = _intern(S, _dedupe(scratch, 1, n))
        if code == -2:
            return False
        gcode[g] = code
    return True


@kernel(helper=True)
def _name_set(G, S, p):
    """_canonize set p with its kernel's id (the first ``klen[p]`` items); False on overflow."""
    kid = _kernel_key(G, S, p, S[I_SET_START][p], S[I_KLEN][p])
    if kid == -2:
        return False
    return _canonize(G, S, p, kid)


@kernel
def mask_key(S):
    """The mask cache's key for the last set r: its content id (``canon[r]``, see
    _canonize); -1 when not named. Equal keys: sets that behave alike, equal masks."""
    return S[I_CANON][S[I_META][N_SETS] - 1]


@kernel
def rehash_interned(S):
    """Re-insert every interned kernel into a fresh (grown) table."""
    ikey = S[I_IKEY]
    ival = S[I_IVAL]
    istart = S[I_ISTART]
    ipool = S[I_IPOOL]
    hm = len(ikey) - 1
    for c in range(S[I_META][N_IDS]):
        h = _kernel_hash(ipool, istart[c], istart[c + 1])
        k = _hash(h) & hm
        while ival[k] >= 0:
            k = (k + 1) & hm
        ikey[k] = h
        ival[k] = c
    return 0


@kernel
def init_chart(G, S, state, p, acc):
    """Start a chart with the single item (state, 0) in set p; sets 0..p-1 are empty
    (p = 1 gives a root whose completion nothing awaits: used to classify tokens)."""
    set_start = S[I_SET_START]
    for j in range(p + 1):
        set_start[j] = 0
        S[I_GRP_START][j] = 0
        S[I_ENT_START][j] = 0
        S[I_SET_FLAG][j] = 0
    meta = S[I_META]
    meta[N_SETS] = p
    meta[GEN] += 1
    gen = meta[GEN]
    key = np.int64(state)
    _insert(S[I_HKEYS], S[I_HGEN], key, gen)
    S[I_ITEMS][0] = key
    S[I_COUNTERS][C_ITEMS] += 1
    S[I_KLEN][p] = 1
    r = _commit(G, S, p, 0, 1, gen, acc)
    if r > 0 and not _name_set(G, S, p):
        return OVERFLOW
    return r


@kernel(helper=True)
def push_byte(G, S, b, acc):
    """Scan byte b from the last committed set into a new set; commit it when non-empty."""
    byte_next = G[0]
    nreal = len(G[4])
    items = S[I_ITEMS]
    set_start = S[I_SET_START]
    meta = S[I_META]
    cnt = S[I_COUNTERS]
    n = meta[N_SETS]
    if n + 2 >= len(set_start):
        return OVERFLOW
    lo = set_start[n - 1]
    hi = set_start[n]
    meta[GEN] += 1
    gen = meta[GEN]
    hkeys = S[I_HKEYS]
    hgen = S[I_HGEN]
    end = hi
    cap = len(items)
    for i in range(lo, hi):
        it = items[i]
        q = it & MASK32
        t = byte_next[q * 256 + b] if q < nreal else -1  # virtual states: no bytes
        if t >= 0:
            key = (it & ~np.int64(MASK32)) | t
            if _insert(hkeys, hgen, key, gen):
                if end >= cap:
                    return OVERFLOW
                items[end] = key
                end += 1
                cnt[C_ITEMS] += 1
                cnt[C_SCAN] += 1
    if end == hi:
        return DEAD
    S[I_KLEN][n] = end - hi
    return _commit(G, S, n, hi, end, gen, acc)


@kernel
def push_bytes(G, S, data, acc):
    """Push every byte of ``data``; on DEAD or OVERFLOW restore the chart and return it.
    Returns the status of the last set otherwise."""
    meta = S[I_META]
    base = meta[N_SETS]
    r = ALIVE
    if len(data) == 0:
        return ALIVE | (ACCEPT if S[I_SET_FLAG][base - 1] != 0 else 0)
    for j in range(len(data)):
        r = push_byte(G, S, data[j], acc)
        if r <= 0:
            meta[N_SETS] = base
            return r
        if not _name_set(G, S, meta[N_SETS] - 1):
            meta[N_SETS] = base
            return OVERFLOW
    return r


@kernel(nrt=True)
def roots(G, S, start_state):
    """Distinct states of the items of the last set that were not predicted there
    (origin < p) and still have an outgoing edge; at p = 0 the start state alone."""
    set_start = S[I_SET_START]
    p = S[I_META][N_SETS] - 1
    if p == 0:
        out = np.empty(1, np.int32)
        out[0] = start_state
        return out
    out = np.empty(set_start[p + 1] - set_start[p], np.int32)
    return out[:_set_roots(G, S, p, out, len(out))]


@kernel(inline="always")
def _set_tokens(tok_start, tok_ids, node, mask):
    for k in range(tok_start[node], tok_start[node + 1]):
        t = tok_ids[k]
        mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@kernel
def walk_range(G, S, T, lo, hi, mask, acc):
    """Walk trie nodes [lo, hi) (a run of whole subtrees, depth-first) against the last set:
    set the bits of the tokens whose bytes keep the chart alive. Restores the chart.
    Returns 0, or -1 on overflow."""
    tbyte, tdepth, tsize, tok_start, tok_ids = T[0], T[1], T[2], T[3], T[4]
    meta = S[I_META]
    cnt = S[I_COUNTERS]
    base = meta[N_SETS]
    d0 = tdepth[lo] if lo < hi else 0
    i = lo
    while i < hi:
        meta[N_SETS] = base + tdepth[i] - d0
        cnt[C_TRIE] += 1
        r = push_byte(G, S, tbyte[i], acc)
        if r < 0:
            meta[N_SETS] = base
            return -1
        if r == DEAD:
            i += tsize[i]
            continue
        _set_tokens(tok_start, tok_ids, i, mask)
        i += 1
    meta[N_SETS] = base
    return 0


# ---------------------------------------------------------------- the set automaton
#
# A mask walk pushes the bytes of many tokens from one committed set r. The Earley set
# reached after a byte is a function of its *kernel* (the items scanned into it): the
# closure adds predictions (origin = the new set) and completions looked up in the waiter
# groups of the kernel items' origin sets, which are either committed sets (<= r) or walk
# sets built earlier in this walk (fixed once built). So walk sets are hash-consed by
# kernel: a byte from a walk set whose kernel was seen before lands on the existing set,
# and ``trans[(s - r) * 256 + b]`` remembers each transition. The walk sets and their
# transitions form a deterministic automaton over bytes, built lazily per mask: inside a
# regular part of the grammar (an identifier, a number, a run of free text) the kernels
# repeat, the automaton closes into a small DFA, and a trie node costs one table lookup
# instead of an Earley step. It recognises exactly what the Earley walk does (same sets,
# shared), so masks are unchanged. Walk sets live above the committed sets (indices
# ``W_ROOT + 1 ..``, allocated upward: an origin is always an older set, so the kernels'
# ``o < p`` tests still mean "completed from an earlier set") and are dropped with the
# next accepted byte, like the plain walk's.


@kernel(helper=True)
def memo_begin(S):
    """Start a set automaton rooted at the last committed set (call after any change of
    the chart, before the memo walks of one mask)."""
    meta = S[I_META]
    r = meta[N_SETS] - 1
    meta[W_ROOT] = r
    meta[W_TOP] = r + 1
    meta[W_NAMED] = r + 1
    meta[MGEN] += 1
    trans = S[I_TRANS]
    for b in range(256):
        trans[b] = M_UNKNOWN
    return 0


@kernel(helper=True)
def _sort_range(a, begin, end):
    """Sort a[begin:end) in place (Shell sort, gaps 3h+1: no allocation)."""
    n = end - begin
    gap = 1
    while gap < n // 3:
        gap = 3 * gap + 1
    while gap >= 1:
        for i in range(begin + gap, end):
            x = a[i]
            j = i
            while j >= begin + gap and a[j - gap] > x:
                a[j] = a[j - gap]
                j -= gap
            a[j] = x
        gap //= 3


@kernel(inline="always")
def _kernel_hash(items, begin, end):
    h = np.int64(end - begin)
    for i in range(begin, end):
        h = _hash(h ^ items[i]) + np.int64(i - begin)
    return h


@kernel(helper=True)
def memo_push(G, S, s, b, acc):
    """The set after byte b from set s (the root or a walk set): a set index, M_DEAD, or
    M_OVERFLOW (nothing changed; grow and retry)."""
    byte_next = G[0]
    nreal = len(G[4])
    trans = S[I_TRANS]
    meta = S[I_META]
    r = meta[W_ROOT]
    ti = (s - r) * 256 + b
    t = trans[ti]
    if t != M_UNKNOWN:
        return t
    items = S[I_ITEMS]
    set_start = S[I_SET_START]
    klen = S[I_KLEN]
    m = meta[W_TOP]
    if m + 2 >= len(set_start) or (m - r + 1) * 256 > len(trans):
        return M_OVERFLOW
    lo = set_start[s]
    hi = set_start[s + 1]
    begin = set_start[m]
    meta[GEN] += 1
    gen = meta[GEN]
    hkeys = S[I_HKEYS]
    hgen = S[I_HGEN]
    cnt = S[I_COUNTERS]
    cap = len(items)
    end = begin
    for i in range(lo, hi):
        it = items[i]
        q = it & MASK32
        nq = byte_next[q * 256 + b] if q < nreal else -1  # virtual states: no bytes
        if nq >= 0:
            key = (it & ~np.int64(MASK32)) | nq
            if _insert(hkeys, hgen, key, gen):
                if end >= cap:
                    return M_OVERFLOW
                items[end] = key
                end += 1
    if end == begin:
        trans[ti] = M_DEAD
        return M_DEAD
    _sort_range(items, begin, end)
    n = end - begin
    mkeys = S[I_MKEYS]
    mgen = S[I_MGEN]
    mval = S[I_MVAL]
    g = meta[MGEN]
    mmask = len(mkeys) - 1
    kid = np.int64(-1)
    naming = m - r > NAME_AFTER and (meta[W_NAMED] > r + 1 or set_start[m] - set_start[r + 1] >= NAME_ITEMS)
    if naming:  # a long walk: name its sets (older first: origins are older)
        for x in range(meta[W_NAMED], m):
            kx = _kernel_key(G, S, x, set_start[x], klen[x])
            if kx == -2 or not _canonize(G, S, x, kx):
                return M_OVERFLOW
            meta[W_NAMED] = x + 1
            if kx >= 0:  # findable by content too
                hx = -1 - kx
                k = _hash(hx) & mmask
                while mgen[k] == g and mkeys[k] != hx:
                    k = (k + 1) & mmask
                if mgen[k] != g:
                    mgen[k] = g
                    mkeys[k] = hx
                    mval[k] = x
        kid = _kernel_key(G, S, m, begin, n)
        if kid == -2:
            return M_OVERFLOW
    if kid >= 0:  # named: hash-consed by content (negative keys)
        h = -1 - kid
    else:  # by the raw kernel (non-negative keys)
        h = _kernel_hash(items, begin, end) & np.int64(0x7FFFFFFFFFFFFFFF)
    k = _hash(h) & mmask
    while mgen[k] == g:
        if mkeys[k] == h:
            c = mval[k]
            if kid >= 0:
                trans[ti] = c
                return c
            if klen[c] == n:
                c0 = set_start[c]
                same = True
                for x in range(n):
                    if items[c0 + x] != items[begin + x]:
                        same = False
                        break
                if same:
                    trans[ti] = c
                    return c
        k = (k + 1) & mmask
    cnt[C_ITEMS] += n
    cnt[C_SCAN] += n
    saved = meta[N_SETS]
    st = _commit(G, S, m, begin, end, gen, acc)
    meta[N_SETS] = saved
    if st < 0:
        return M_OVERFLOW
    if naming:
        if not _canonize(G, S, m, kid):
            return M_OVERFLOW
        meta[W_NAMED] = m + 1
    klen[m] = n
    mgen[k] = g
    mkeys[k] = h
    mval[k] = m
    meta[W_TOP] = m + 1
    row = (m - r) * 256
    for x in range(256):
        trans[row + x] = M_UNKNOWN
    trans[ti] = m
    return m


@kernel(helper=True)
def memo_walk_range(G, S, T, lo, hi, start, mask, acc, stack):
    """walk_range through the set automaton, from set ``start`` (the parent of node lo):
    set the bits of the tokens of trie nodes [lo, hi) whose bytes keep the chart alive.
    Returns 0, or -1 on overflow (the bits set so far are right; rerun after growing)."""
    tbyte, tdepth, tsize, tok_start, tok_ids = T[0], T[1], T[2], T[3], T[4]
    cnt = S[I_COUNTERS]
    trans = S[I_TRANS]
    r = S[I_META][W_ROOT]
    if lo >= hi:
        return 0
    stack[tdepth[lo] - 1] = start
    i = lo
    while i < hi:
        d = tdepth[i]
        cnt[C_TRIE] += 1
        t = trans[(stack[d - 1] - r) * 256 + tbyte[i]]
        if t == M_UNKNOWN:
            t = memo_push(G, S, stack[d - 1], tbyte[i], acc)
            if t == M_OVERFLOW:
                return -1
        if t == M_DEAD:
            i += tsize[i]
            continue
        stack[d] = t
        _set_tokens(tok_start, tok_ids, i, mask)
        i += 1
    return 0


# ---------------------------------------------------------------- subtree classes
#
# A U walk that leaves its root's rule goes on in the context, and at a free-text position
# (an identifier after a keyword and its whitespace, an expression after "= ") that is
# most of the trie: ~95k nodes per mask for C, one table lookup each. The split of
# tokens.py holds below any trie node too: at node i, reached with walk set t (the exact
# Earley set after i's bytes), a token below i is allowed iff for some *root* q of t (an
# item of t with origin < t and an edge; every other item of t descends from one by
# prediction, and a completion at t has advanced its parent, a root) its bytes after i's
# are in AW_i(q), or in U_i(q) and the walk from t keeps them alive (``classify_state``
# rooted at node i; subtrees.py keeps the rows). They depend on q and i alone, so they
# are built once per pair (on first need: the walk records the pair in ``req`` and goes
# node by node meanwhile) and serve every later mask: at an identifier, U_i is the few
# tokens that end it. A whole-subtree walk entry with at least SUB_MIN nodes below (a
# listed one: SUB_BIG) splits this way when its set has at most SUB_ITEMS items and
# SUB_ROOTS roots and the rows' work (subtrees.py) is at most half the subtree; the entry lists it then walks are pushed as frames (an explicit stack: a
# frame's entries may split again, deeper). Masks are unchanged: a token below i is
# decided by the same sets either way.

SUB_MIN = 256  # trie nodes in a subtree (its root included) for a walk entry to split
SUB_ROOTS = 16  # at most this many roots of the entry's set (more: walked node by node)
SUB_BIG = 4096  # ... and a listed (not whole) entry's, whose subtree is walked by its own entries
SUB_ITEMS = 256  # at most this many items in the entry's set (finding the roots is a scan)
INFO_W = 5  # ints per subtree row in subtrees.py's info: entries, AW words, work
FRAME_W = 5  # ints per frame: next entry, end entry, depth d0, set at d0, pool (0 tokens.py, 1 subtrees.py)


@kernel(inline="always")
def _sub_class(sub_key, sub_val, key):
    """The subtree row of key ``cls_index << 32 | node`` (open addressing; -1: none)."""
    m = len(sub_key) - 1
    h = _hash(key) & m
    while True:
        k = sub_key[h]
        if k == key:
            return sub_val[h]
        if k < 0:
            return -1
        h = (h + 1) & m


@kernel(helper=True)
def memo_walk_frames(G, S, T, P, fr, nf, mask, acc, stack, scratch, req):
    """Walk the frames ``fr[:FRAME_W * nf]`` (each a run [j, end) of walk entries of pool 0,
    the state classes, or 1, the subtree classes; its entries at depth d0 + 1 step from the
    set stored with it) through the set automaton (after ``memo_begin``), splitting big
    whole-subtree entries by subtree classes (above); ``scratch`` (>= 2 * SUB_ROOTS ints)
    holds an entry's roots and their rows. Pairs (state, node) without subtree classes yet
    whose subtree took SUB_MIN nodes or more to walk are appended to ``req`` (count in
    ``req[0]``, as many as fit). Returns 0, or -1 on overflow (the bits set so far are
    right)."""
    tbyte, tdepth, tsize, tok_start, tok_ids = T[0], T[1], T[2], T[3], T[4]
    cls_id, aw_pool, ent_start, ent_node, ent_kind, ent_skip, longest = (
        P[0], P[1], P[2], P[3], P[4], P[5], P[6])
    sub_key, sub_val, info, sub_node, sub_kind, sub_skip, aw_word, aw_bits = (
        P[7], P[8], P[9], P[10], P[11], P[12], P[13], P[14])
    lg = longest[0]
    cnt = S[I_COUNTERS]
    trans = S[I_TRANS]
    r = S[I_META][W_ROOT]
    cap = len(fr) // FRAME_W
    while nf > 0:
        f = FRAME_W * (nf - 1)
        j = fr[f]
        if j >= fr[f + 1]:
            nf -= 1
            continue
        pool = fr[f + 4]
        en = ent_node if pool == 0 else sub_node
        node = en[j]
        skip = ent_skip[j] if pool == 0 else sub_skip[j]
        whole = (ent_kind[j] if pool == 0 else sub_kind[j]) == 1
        d = tdepth[node]
        ps = fr[f + 3] if d == fr[f + 2] + 1 else stack[d - 1]
        cnt[C_TRIE] += 1
        t = trans[(ps - r) * 256 + tbyte[node]]
        if t == M_UNKNOWN:
            t = memo_push(G, S, ps, tbyte[node], acc)
            if t == M_OVERFLOW:
                return -1
        if t == M_DEAD:
            fr[f] = j + skip
            continue
        stack[d] = t
        _set_tokens(tok_start, tok_ids, node, mask)
        if tsize[node] <= 1 or not (whole or tsize[node] >= SUB_BIG):
            fr[f] = j + 1
            continue
        k = SUB_ROOTS + 1
        miss = 0
        if tsize[node] >= SUB_MIN and S[I_SET_START][t + 1] - S[I_SET_START][t] <= SUB_ITEMS:
            k = _set_roots(G, S, t, scratch, SUB_ROOTS)
            if k <= SUB_ROOTS and nf + k <= cap:
                work = 0
                for a in range(k):
                    c = _sub_class(sub_key, sub_val, (np.int64(cls_index(G, lg, scratch[a])) << 32) | node)
                    scratch[SUB_ROOTS + a] = c
                    if c < 0:
                        miss += 1
                    else:
                        work += info[INFO_W * c + 4]
                if miss == 0 and 2 * work <= tsize[node]:  # split: this frame goes on after the subtree
                    fr[f] = j + skip
                    for a in range(k):
                        c = INFO_W * scratch[SUB_ROOTS + a]
                        for x in range(info[c + 2], info[c + 3]):
                            mask[aw_word[x]] |= np.uint32(aw_bits[x])
                        if info[c + 1] > info[c]:
                            g = FRAME_W * nf
                            fr[g] = info[c]
                            fr[g + 1] = info[c + 1]
                            fr[g + 2] = d
                            fr[g + 3] = t
                            fr[g + 4] = 1
                            nf += 1
                    continue
        before = cnt[C_TRIE]
        if whole and memo_walk_range(G, S, T, node + 1, node + tsize[node], t, mask, acc, stack) < 0:
            return -1
        # ask for the classes after a long walk (a listed node's walk is its entries', later:
        # asked for when its subtree is very big)
        if miss > 0 and (cnt[C_TRIE] - before >= SUB_MIN or not whole):
            for a in range(k):
                n_req = req[0]
                if scratch[SUB_ROOTS + a] < 0 and 2 * n_req + 3 <= len(req):
                    req[2 * n_req + 1] = scratch[a]
                    req[2 * n_req + 2] = node
                    req[0] = n_req + 1
        fr[f] = j + 1
    return 0


@kernel
def classify_state(G, S, T, state, node, aw_mask, out_node, out_kind, comp, path, marked, sets):
    """Token classes of one automaton state q below trie node ``node`` (0: the whole
    vocabulary), with the chart rooted at (q, 0) and nothing awaiting its rule (xgrammar's
    context-independent tokens, adapted to Earley); a token below ``node`` is judged by its
    bytes after the node's (its suffix):
      * AW(q): tokens whose suffix is a prefix of L(q) (the rule from q, sub-rules
        expanded): accepted in every context where an item at q is live at the node (bits
        set in aw_mask);
      * U(q): tokens not in AW(q) with a non-empty prefix of the suffix in L(q): they finish
        the rule and go on in the context, so they are decided at mask time by walking them;
      * the rest are rejected in every context (through this item).
    U(q) is returned as walk entries (node, kind) in depth-first order (memo_walk_frames walks them);
    returns their count, or -1 on overflow. The trie is walked through the set automaton
    (``path[d]`` / ``sets[d]`` = the node / the set at depth d below ``node``)."""
    tbyte, tdepth, tsize, tok_start, tok_ids = T[0], T[1], T[2], T[3], T[4]
    r = init_chart(G, S, state, 1, -1)
    if r < 0:
        return -1
    memo_begin(S)
    set_flag = S[I_SET_FLAG]
    cnt = S[I_COUNTERS]
    comp[0] = 0
    r0 = S[I_META][W_ROOT]
    sets[0] = r0
    trans = S[I_TRANS]
    nu = 0
    d0 = tdepth[node]
    n = node + tsize[node]
    i = node + 1
    while i < n:
        d = tdepth[i] - d0
        marked[d] = 0
        cnt[C_TRIE] += 1
        t = trans[(sets[d - 1] - r0) * 256 + tbyte[i]]
        if t == M_UNKNOWN:
            t = memo_push(G, S, sets[d - 1], tbyte[i], -1)
            if t == M_OVERFLOW:
                return -1
        if t == M_DEAD:
            if comp[d - 1] != 0:
                for a in range(1, d):
                    if marked[a] == 0:
                        marked[a] = 1
                        out_node[nu] = path[a]
                        out_kind[nu] = 0
                        nu += 1
                out_node[nu] = i
                out_kind[nu] = 1
                nu += 1
            i += tsize[i]
            continue
        sets[d] = t
        path[d] = i
        _set_tokens(tok_start, tok_ids, i, aw_mask)
        comp[d] = 1 if (comp[d - 1] != 0 or set_flag[t] != 0) else 0
        i += 1
    return nu


@kernel(nrt=True)
def entry_skips(ent_node, ent_kind, tsize):
    """For each walk entry, 1 + the number of following entries inside its subtree."""
    n = len(ent_node)
    out = np.ones(n, np.int32)
    for j in range(n):
        if ent_kind[j] == 0:
            end = ent_node[j] + tsize[ent_node[j]]
            k = j + 1
            while k < n and ent_node[k] < end:
                k += 1
            out[j] = k - j
    return out


# ---------------------------------------------------------------- one mask, one call


@kernel(inline="always")
def _among(a, k, v):
    """Whether v is in a[:k]."""
    for j in range(k):
        if a[j] == v:
            return True
    return False


@kernel(helper=True)
def _set_roots(G, S, p, out, limit):
    """The distinct roots of set p >= 1 (committed or a walk set: its states with an edge
    whose items have origin < p) into ``out``; their count, or limit + 1 when there are more
    than ``limit`` (<= len(out))."""
    items = S[I_ITEMS]
    set_start = S[I_SET_START]
    k = 0
    for i in range(set_start[p], set_start[p + 1]):
        it = items[i]
        q = it & MASK32
        if (it >> 32) < p and (_sflags(G, q) & HAS_OUT) != 0 and not _among(out, k, q):
            if k == limit:
                return k + 1
            out[k] = q
            k += 1
    return k


@kernel(helper=True)
def _roots_into(G, S, start_state, out):
    """``roots`` without allocation: the distinct roots of the last set into ``out``;
    returns their count, or len(out) + 1 when there are more than len(out)."""
    p = S[I_META][N_SETS] - 1
    if p == 0:
        out[0] = start_state
        return 1
    return _set_roots(G, S, p, out, len(out))


@kernel
def cls_index(G, longest, q):
    """Where state q's token classes are in a TokenTable's ``cls_id``: at q for a real
    state; a count c of a counted repetition (m, cap) is classed by its need = m - c and
    room = cap - c, each clipped at longest + 1 (a token completes at most ``longest``
    copies: a count moves only on a non-empty copy), so counts with equal clipped pairs
    have equal classes; along the counts the pairs only decrease, so their class number
    (longest + 1 - need) + (longest + 1 - room) tells them apart: index len(flags) +
    (repetition number) * (2 * longest + 3) + that number."""
    nreal = len(G[4])
    if q < nreal:
        return q
    reps = G[8]
    j = _vrow(reps, q)
    c = q - reps[j]
    top = longest + 1
    need = 0 if (reps[j + 3] & REP_NULLABLE) != 0 else min(max(reps[j + 1] - c, 0), top)
    room = top if (reps[j + 3] & REP_UNBOUNDED) != 0 else min(reps[j + 2] - c, top)
    return nreal + (j // REP_W) * (2 * top + 1) + (top - need) + (top - room)


@kernel(helper=True)
def fill_mask(G, S, T, P, mask, acc, start_state, eos, stack, roots_buf, frames, req):
    """The whole mask of the last set into ``mask`` (uint32 words; words past the
    vocabulary's are zeroed): the union of AW(q) and the walk of U(q) over its roots q
    (tokens.py), through the set automaton; more roots than ``roots_buf`` holds: the whole
    trie is walked instead. Stop tokens ``eos`` when the set accepts.
    P = (cls_id, aw_pool, ent_start, ent_node, ent_kind, ent_skip, longest) + the subtree
    classes' arrays (subtrees.py) from TokenTable: state q's classes are row/entries
    ``cls_id[cls_index(G, longest[0], q)]`` (-1: not classified yet; longest[0] = the
    vocabulary's longest token, in bytes). The U walks run as frames (``frames``: memo_walk_frames) and record in ``req``
    the subtree pairs they would have split with classes (build them, later masks split).
    Returns 0; -1 on overflow (grow the chart, call again); k > 0 when k roots are not
    classified yet (listed in roots_buf[:k]: classify them, call again).
    The mask cache (chart arrays I_MC_*, direct-mapped, keyed by the set's content id from
    ``_canonize``) returns the mask computed before for an equal set: inside a string or a
    comment, step after step."""
    tbyte = T[0]
    mc_mask = S[I_MC_MASK]
    slots = mc_mask.shape[0]
    nw = mc_mask.shape[1]
    key = -1
    slot = 0
    if slots > 0 and len(mask) >= nw:
        key = mask_key(S)
        if key == -2:
            return -1
        if key >= 0:
            slot = key & (slots - 1)
            if S[I_MC_KEY][slot] == key:
                for w in range(nw):
                    mask[w] = mc_mask[slot, w]
                for w in range(nw, len(mask)):
                    mask[w] = 0
                return 0
    st = _fill_mask(G, S, T, P, mask, acc, start_state, eos, stack, roots_buf, frames, req)
    if st == 0 and key >= 0:
        for w in range(nw):
            mc_mask[slot, w] = mask[w]
        S[I_MC_KEY][slot] = key
    return st


@kernel(helper=True)
def _fill_mask(G, S, T, P, mask, acc, start_state, eos, stack, roots_buf, frames, req):
    """fill_mask without the mask cache."""
    cls_id, aw_pool, ent_start, ent_node, ent_kind, ent_skip, longest = (
        P[0], P[1], P[2], P[3], P[4], P[5], P[6])
    lg = longest[0]
    tbyte = T[0]
    for w in range(len(mask)):
        mask[w] = 0
    nr = _roots_into(G, S, start_state, roots_buf)
    memo_begin(S)
    if nr > len(roots_buf):
        if memo_walk_range(G, S, T, 1, len(tbyte), S[I_META][W_ROOT], mask, acc, stack) < 0:
            return -1
    else:
        miss = 0
        for i in range(nr):
            q = roots_buf[i]
            if cls_id[cls_index(G, lg, q)] < 0:
                roots_buf[miss] = q
                miss += 1
        if miss > 0:
            return miss
        nw = aw_pool.shape[1]
        k = 0
        for i in range(nr):  # the roots' rows, each once (states with equal classes share one)
            c = cls_id[cls_index(G, lg, roots_buf[i])]
            if not _among(roots_buf, k, c):
                roots_buf[k] = c
                k += 1
                for w in range(nw):
                    mask[w] |= aw_pool[c, w]
        nf = 0
        r = S[I_META][W_ROOT]
        for i in range(k - 1, -1, -1):  # frames run last pushed first: the rows in order
            c = roots_buf[i]
            if ent_start[c + 1] > ent_start[c]:
                g = FRAME_W * nf
                frames[g] = ent_start[c]
                frames[g + 1] = ent_start[c + 1]
                frames[g + 2] = 0
                frames[g + 3] = r
                frames[g + 4] = 0
                nf += 1
        if nf > 0 and memo_walk_frames(G, S, T, P, frames, nf, mask, acc, stack, roots_buf, req) < 0:
            return -1
    if S[I_SET_FLAG][S[I_META][N_SETS] - 1] != 0:
        for e in eos:
            mask[e >> 5] |= np.uint32(1) << np.uint32(e & 31)
    return 0


# ---------------------------------------------------------------- packed entry (packed.py)
#
# ``fill_mask`` through one int64 vector of array addresses: slots (WIDTH ints each) in
# the order G, S, T, P, then eos, stack, roots, delta (int64[N_COUNTERS]: the call's
# counter deltas), frames and req (see fill_mask), then one slot of scalars (acc,
# start_state). The layouts are checked by ``packed.pack`` when a vector is written.

LAYOUT_G = "i32 " * 9
LAYOUT_S = ("i64 i32 i32 i32 i32 i32 i32 i32 i32 i32 i64 i64 i64 i32 i32 i32 i32 i64 i64 "
            "i32 i32 i64 i64 i32 i64 i64 u32x2 i64 i64 i32 i32 i64 i64")
LAYOUT_T = "i32 " * 5
LAYOUT_P = "i32 u32x2 i32 i32 i32 i32 i32 i64 i32 i32 i32 i32 i32 i32 i32"
LAYOUT_MATCHER = "i64 i32 i32 i64 i32 i32"
AT_G, AT_S, AT_T, AT_P, AT_MATCHER, AT_SCALARS = 0, 9, 42, 47, 62, 68
PACKED_SLOTS = 69


@kernel(inline="always")
def _unpack(A):
    """(G, S, T, P) of the address vector ``A``: each a ``PackedType`` over its slots
    (packed.packed_at), the same type a ``Packed`` tuple has in a kernel."""
    return (packed_at(A, AT_G, LAYOUT_G), packed_at(A, AT_S, LAYOUT_S), packed_at(A, AT_T, LAYOUT_T),
            packed_at(A, AT_P, LAYOUT_P))


@kernel
def fill_mask_packed(A, mask):
    """``fill_mask`` with its arguments unpacked from the address vector ``A`` (see above);
    the counter deltas of the call land in the delta slot."""
    G, S, T, P = _unpack(A)
    m = AT_MATCHER
    i32, i64 = np.int32, np.int64
    eos = slot1(A, m, i64)
    delta = slot1(A, m + 3, i64)
    cnt = S[I_COUNTERS]
    for i in range(N_COUNTERS):
        delta[i] = -cnt[i]
    r = fill_mask(G, S, T, P, mask, A[3 * AT_SCALARS], A[3 * AT_SCALARS + 1], eos,
                  slot1(A, m + 1, i32), slot1(A, m + 2, i32), slot1(A, m + 4, i32), slot1(A, m + 5, i32))
    for i in range(N_COUNTERS):
        delta[i] += cnt[i]
    return r


# ---------------------------------------------------------------- many rows, one call per thread
#
# BatchMatcher (batch.py) fills a batch with one call of ``fill_rows`` per thread: rows are
# taken from a shared counter (an atomic fetch-and-add), so no Python runs between rows.

PACKED_WIDTH = pack_width(PACKED_SLOTS)
_DELTA = pack_width(AT_MATCHER + 3)  # where an address vector holds its delta array's address


@kernel(helper=True)
def mask_cached(S):
    """Whether the mask cache holds the next mask of this chart (``fill_mask`` copies it):
    known before the mask runs, in a lookup. Reads only."""
    slots = S[I_MC_MASK].shape[0]
    key = mask_key(S)
    return slots > 0 and key >= 0 and S[I_MC_KEY][key & (slots - 1)] == key


@kernel
def plan_rows(addrs, order, work):
    """``work[i]`` = row i's estimated work for this mask: 0 when its mask cache holds the
    mask (``mask_cached``), else the work of its last mask (trie nodes + Earley items, from
    the counter deltas its last ``fill_mask_packed`` call left in its delta array); sort
    ``order`` (row numbers) by it, heaviest first (ties: the given order); return the total.
    Masks never depend on it: it only schedules."""
    n = len(addrs)
    total = 0
    for i in range(n):
        A = view1(addrs[i], PACKED_WIDTH, np.int64)
        G, S, T, P = _unpack(A)
        if mask_cached(S):
            work[i] = 0
        else:
            d = view1(A[_DELTA], N_COUNTERS, np.int64)
            work[i] = d[C_TRIE] + d[C_ITEMS]
        total += work[i]
    for i in range(1, n):  # insertion sort: a batch is a few dozen rows
        x = order[i]
        j = i - 1
        while j >= 0 and work[order[j]] < work[x]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = x
    return total


@kernel
def fill_rows(addrs, width, out, rows, order, counter, status):
    """Fill rows until the shared ``counter`` passes ``len(order)``: take k, fill row
    ``i = order[k]`` (its matcher's address vector at ``addrs[i]``, ``width`` int64s) into
    ``out[rows[i]]``, its status into ``status[i]``. Returns how many rows this call filled."""
    n = len(order)
    done = 0
    while True:
        k = fetch_add(counter)
        if k >= n:
            return done
        i = order[k]
        status[i] = fill_mask_packed(view1(addrs[i], width, np.int64), out[rows[i]])
        done += 1
