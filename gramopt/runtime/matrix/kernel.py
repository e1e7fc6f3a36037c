"""The incremental CYK table over bitsets: numba kernels over flat arrays.

Column t holds the spans (i, t) that end after t bytes, transposed: one entry per
nonterminal A present in the column, with the bitset over origins i < t of the cells
(i, t) that hold A (``pool[off : off + ceil(t/64)]``). Only present nonterminals have an
entry, so a column costs its non-empty cells, not N·t.

A new column t (byte b at position t-1) is the Boolean product of the triangle with
itself restricted to the newest column (Valiant's recurrence, one column at a time):

    cell(i, t) = Pred(i) ∩ U*( ⋃_{i<k<t} { A : A → B C, B ∈ cell(i, k), C ∈ cell(k, t) } )

solved by back-substitution over the split point k = t-1 … 0, each step one
bitset-packed product: when the cell (k, t) is final (every k' > k has added to it),
every C in it and every rule A → B C ORs B's origin bitset of column k into A's bitset
of column t — all origins i < k at once, ``ceil(k/64)`` words per rule. Split points with
an empty cell are skipped through the union of the column's bitsets (``any``), so the
work is the non-empty cells times the rules that combine them.

Pred(t) = LC*({ C : A → B C, A ∈ Pred(i), B ∈ cell(i, t) }) (Pred(0) = LC*(S)) is the
set of nonterminals that can start at t given the prefix: Earley's prediction in matrix
form (Graham, Harrison & Ruzzo 1980). It filters the cells (top-down, as above) and gives
the prefix test: a non-empty prefix is viable iff Pred(t) ≠ ∅ or S ∈ cell(0, t).
``pred_row[t]`` holds Pred(t) as an N-bit row and ``pred_t[A]`` the positions where A is
predicted (bit t), both written together so a stale position is cleared from the row.

State (committed columns 0..T; rolling back is lowering T — nothing else to undo):
  col_start[t] .. col_start[t+1]   entries of column t (t ≥ 1; column 0 is empty)
  col_pool[t]                      pool words used after column t
  ent_lo[e]                        the first non-zero word of entry e's bitset (products
                                   and prediction start there: most bitsets are short)
  col_r1[t]                        rules with a left child in column t (picks the cheaper
                                   side of a product: by left child or by right child)
Kernel status: VIABLE (1), DEAD (0), OVERFLOW (-1: a capacity ran out; grow and retry).
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel


VIABLE = 1
DEAD = 0
OVERFLOW = -1

# counters (cumulative; callers subtract)
C_COLUMNS = 0  # columns computed (bytes pushed)
C_SPLITS = 1  # split points k with a non-empty cell (k, t) visited
C_CELLS = 2  # (nonterminal, span) pairs made final
C_PRODUCTS = 3  # rule applications A |= B over a whole origin bitset
C_WORDS = 4  # 64-bit words OR-ed by those products
C_TRIE = 5  # trie nodes visited by a mask walk
N_COUNTERS = 6

_ONE = np.uint64(1)


@kernel(inline="always", nogil=False, nrt=True)
def _bit(a, row, i):
    """Bit i of row ``row`` of a 2-D uint64 array (no row view: views cost a refcount)."""
    return (a[row, i >> 6] >> np.uint64(i & 63)) & _ONE


@kernel(inline="always", nogil=False, nrt=True)
def _low_index(x):
    """Index of the lowest set bit of a non-zero uint64."""
    low = x & (~x + _ONE)
    return int(np.log2(np.float64(low)))


@kernel(nogil=False, nrt=True)
def _close_pred(lc_start, lc, pred_row, pred_t, stack, seeds, ns, t):
    """Pred(t) = LC*(seeds): a depth-first walk of the left corners, marking row t and the
    positions of ``pred_t``; returns whether anything is predicted."""
    tw = t >> 6
    tb = _ONE << np.uint64(t & 63)
    sp = 0
    for i in range(ns):
        c = seeds[i]
        if not _bit(pred_row, t, c):
            pred_row[t, c >> 6] |= _ONE << np.uint64(c & 63)
            pred_t[c, tw] |= tb
            stack[sp] = c
            sp += 1
    found = sp > 0
    while sp > 0:
        sp -= 1
        x = stack[sp]
        for j in range(lc_start[x], lc_start[x + 1]):
            y = lc[j]
            if not _bit(pred_row, t, y):
                pred_row[t, y >> 6] |= _ONE << np.uint64(y & 63)
                pred_t[y, tw] |= tb
                stack[sp] = y
                sp += 1
    return found


@kernel(nogil=False, nrt=True)
def write_pred0(start, lc_start, lc, pred_row, pred_t, seed_start, seed_pool, stack):
    """Pred(0) = LC*(S), seeded by S with an empty follow context (nothing when the start
    derives no non-empty string)."""
    _clear_pred(pred_row, pred_t, 0)
    seed_start[0] = 0
    seed_start[1] = 0
    if start >= 0:
        seed_pool[0] = start
        for x in range(1, 5):
            seed_pool[x] = 0
        seed_start[1] = 5
        seeds = np.full(1, start, np.int32)
        _close_pred(lc_start, lc, pred_row, pred_t, stack, seeds, 1, 0)


@kernel(nogil=False, nrt=True)
def _clear_pred(pred_row, pred_t, t):
    tw = t >> 6
    tb = ~(_ONE << np.uint64(t & 63))
    for w in range(pred_row.shape[1]):
        x = pred_row[t, w]
        while x:
            a = w * 64 + _low_index(x)
            pred_t[a, tw] &= tb
            x &= x - _ONE
        pred_row[t, w] = 0


@kernel(inline="always", nogil=False, nrt=True)
def _live(byte_start, byte_pre, pred_row, k, b):
    """Some preterminal of byte b is predicted at k (else the prefix dies at b)."""
    for j in range(byte_start[b], byte_start[b + 1]):
        if _bit(pred_row, k, byte_pre[j]):
            return True
    return False


@kernel(inline="always", nogil=False, nrt=True)
def _column_entry(a, pool, ent_nt, ent_off, cur_idx, e0, p0, nw, ne):
    """A's entry in the current column: its index, or a new zeroed one (the ``ne``-th) when A
    has none yet. Returns (index, ne)."""
    e = cur_idx[a]
    if e < 0:
        e = ne
        off = p0 + ne * nw
        for w in range(nw):
            pool[off + w] = 0
        ent_nt[e0 + ne] = a
        ent_off[e0 + ne] = off
        cur_idx[a] = ne
        ne += 1
    return e, ne


@kernel(inline="always", nogil=False, nrt=True)
def _or_into_entry(a, src_e, kwords, pool, ent_nt, ent_off, ent_lo, cur_idx, anyb, e0, p0, nw, ne):
    """One product A → B C found: A's entry in the current column (a zeroed new one, the
    ``ne``-th, if A has none yet) |= the start-position bits of entry ``src_e`` (B's), words
    ``ent_lo[src_e]`` to ``kwords``; ``anyb`` collects them too. Returns (ne, words OR-ed)."""
    e, ne = _column_entry(a, pool, ent_nt, ent_off, cur_idx, e0, p0, nw, ne)
    dst = ent_off[e0 + e]
    src = ent_off[src_e]
    lo = ent_lo[src_e]
    for w in range(lo, kwords):
        x = pool[src + w]
        pool[dst + w] |= x
        anyb[w] |= x
    return ne, kwords - lo


@kernel(nogil=False, nrt=True)
def push_byte(byte_start, byte_pre, r2_start, r2_lhs, r2_b, r1_start, r1_lhs, r1_c, up_start, up,
              lc_start, lc, follow, start, col_start, col_pool, col_r1, ent_nt, ent_off, ent_lo, pool, pred_row, pred_t,
              seed_start, seed_pool, cur_idx, prev_idx, in_f, finals, seed_flag, fctx, stack, counters, t, b,
              only_viable):
    """Compute column t from columns < t for byte ``b`` at position t-1; write Pred(t).
    Returns (status, accepting). With ``only_viable`` (a trie leaf: nothing will be built
    on this column) it may return VIABLE as soon as one nonterminal is predicted at t,
    leaving the column unwritten. ``seed_pool[seed_start[t]:seed_start[t+1]]`` gets the
    mask cache's key: the seeds of Pred(t) in increasing order (the C of every A → B C
    with A ∈ Pred(i), B ∈ cell(i, t)), each followed by its follow context, the union
    of follow(A) over those rules (4 words of a 256-bit byte set)."""
    # a byte that no predicted preterminal matches ends the prefix: nothing to compute
    k = t - 1
    if not _live(byte_start, byte_pre, pred_row, k, b):
        return DEAD, False
    n = cur_idx.shape[0]
    nw = (t + 63) >> 6
    e0 = col_start[t]
    p0 = col_pool[t - 1]
    if t + 1 >= pred_row.shape[0] or t + 1 >= col_start.shape[0] or (t >> 6) >= pred_t.shape[1]:
        return OVERFLOW, False
    if e0 + n > ent_nt.shape[0] or p0 + n * nw > pool.shape[0] or seed_start[t] + 5 * n > seed_pool.shape[0]:
        return OVERFLOW, False
    c_splits = 0
    c_cells = 0
    c_products = 0
    c_words = 0
    ne = 0
    anyb = np.zeros(nw, np.uint64)
    # seeds: the preterminals of b predicted at t-1
    kb = _ONE << np.uint64(k & 63)
    for j in range(byte_start[b], byte_start[b + 1]):
        p = byte_pre[j]
        if _bit(pred_row, k, p):
            off = p0 + ne * nw
            for w in range(nw):
                pool[off + w] = 0
            pool[off + (k >> 6)] |= kb
            ent_nt[e0 + ne] = p
            ent_off[e0 + ne] = off
            cur_idx[p] = ne
            ne += 1
    anyb[k >> 6] |= kb
    early = False
    # back-substitution over the split points k = t-1 … 0
    while True:
        wi = k >> 6
        word = anyb[wi]
        if (k & 63) != 63:
            word &= (_ONE << np.uint64((k & 63) + 1)) - _ONE
        while word == 0 and wi > 0:
            wi -= 1
            word = anyb[wi]
        if word == 0:
            break
        hb = 63
        while not (word >> np.uint64(hb)) & _ONE:
            hb -= 1
        k = wi * 64 + hb
        c_splits += 1
        kw = k >> 6
        kb = _ONE << np.uint64(k & 63)
        nf = 0
        for e in range(ne):
            off = ent_off[e0 + e]
            if pool[off + kw] & kb:
                a = ent_nt[e0 + e]
                if _bit(pred_row, k, a):
                    finals[nf] = a
                    nf += 1
                    in_f[a] = True
                else:
                    pool[off + kw] &= ~kb
        # unit closure of the cell (k, t)
        nd = nf
        for i in range(nd):
            c = finals[i]
            for j in range(up_start[c] + 1, up_start[c + 1]):
                a = up[j]
                if not in_f[a] and _bit(pred_row, k, a):
                    in_f[a] = True
                    finals[nf] = a
                    nf += 1
                    e, ne = _column_entry(a, pool, ent_nt, ent_off, cur_idx, e0, p0, nw, ne)
                    pool[ent_off[e0 + e] + kw] |= kb
        c_cells += nf
        if only_viable:  # B ∈ cell(k, t), A → B C, A ∈ Pred(k)  ⇒  C ∈ Pred(t)
            for i in range(nf):
                c = finals[i]
                for r in range(r1_start[c], r1_start[c + 1]):
                    if _bit(pred_row, k, r1_lhs[r]):
                        early = True
                        break
                if early:
                    break
            if early or (k == 0 and in_f[start]):
                for i in range(nf):
                    in_f[finals[i]] = False
                early = True
                break
        # products: C ∈ cell(k, t), A → B C, B ∈ cell(i, k)  ⇒  A ∈ cell(i, t) for those i
        if k >= 1 and nf > 0:
            ks = col_start[k]
            ke = col_start[k + 1]
            kwords = (k + 63) >> 6
            by_right = 0
            for i in range(nf):
                c = finals[i]
                by_right += r2_start[c + 1] - r2_start[c]
            if col_r1[k] <= by_right + 2 * (ke - ks):
                # by the left child: B's rules whose right child is final here
                for src_e in range(ks, ke):
                    bnt = ent_nt[src_e]
                    for r in range(r1_start[bnt], r1_start[bnt + 1]):
                        if not in_f[r1_c[r]]:
                            continue
                        ne, words = _or_into_entry(r1_lhs[r], src_e, kwords, pool, ent_nt, ent_off, ent_lo, cur_idx,
                                                   anyb, e0, p0, nw, ne)
                        c_products += 1
                        c_words += words
            else:
                # by the right child: the final C's rules whose left child is in column k
                for e in range(ks, ke):
                    prev_idx[ent_nt[e]] = e
                for i in range(nf):
                    c = finals[i]
                    for r in range(r2_start[c], r2_start[c + 1]):
                        src_e = prev_idx[r2_b[r]]
                        if src_e < 0:
                            continue
                        ne, words = _or_into_entry(r2_lhs[r], src_e, kwords, pool, ent_nt, ent_off, ent_lo, cur_idx,
                                                   anyb, e0, p0, nw, ne)
                        c_products += 1
                        c_words += words
                for e in range(ks, ke):
                    prev_idx[ent_nt[e]] = -1
        for i in range(nf):
            in_f[finals[i]] = False
        if k == 0:
            break
        k -= 1
    counters[C_COLUMNS] += 1
    counters[C_SPLITS] += c_splits
    counters[C_CELLS] += c_cells
    counters[C_PRODUCTS] += c_products
    counters[C_WORDS] += c_words
    if early:
        for e in range(ne):
            cur_idx[ent_nt[e0 + e]] = -1
        return VIABLE, False
    # compact: drop entries whose every cell was filtered out
    m = 0
    accepting = False
    r1cost = 0
    for e in range(ne):
        a = ent_nt[e0 + e]
        cur_idx[a] = -1
        off = ent_off[e0 + e]
        lo = 0
        while lo < nw and pool[off + lo] == 0:
            lo += 1
        if lo == nw:
            continue
        dst = p0 + m * nw
        if dst != off:
            for w in range(nw):
                pool[dst + w] = pool[off + w]
        ent_nt[e0 + m] = a
        ent_off[e0 + m] = dst
        ent_lo[e0 + m] = lo
        r1cost += r1_start[a + 1] - r1_start[a]
        if a == start and pool[dst] & _ONE:
            accepting = True
        m += 1
    col_start[t + 1] = e0 + m
    col_pool[t] = p0 + m * nw
    col_r1[t] = r1cost
    # Pred(t)
    _clear_pred(pred_row, pred_t, t)
    ns = 0
    for e in range(e0, e0 + m):
        bnt = ent_nt[e]
        off = ent_off[e]
        for r in range(r1_start[bnt], r1_start[bnt + 1]):
            c = r1_c[r]
            a = r1_lhs[r]
            if seed_flag[c] and (follow[a, 0] & ~fctx[c, 0]) == 0 and (follow[a, 1] & ~fctx[c, 1]) == 0 \
                    and (follow[a, 2] & ~fctx[c, 2]) == 0 and (follow[a, 3] & ~fctx[c, 3]) == 0:
                continue  # nothing new: c is a seed and A's follow is in its context already
            for w in range(ent_lo[e], nw):
                if pool[off + w] & pred_t[a, w]:
                    if not seed_flag[c]:
                        seed_flag[c] = True
                        finals[ns] = c
                        ns += 1
                        for x in range(4):
                            fctx[c, x] = 0
                    for x in range(4):
                        fctx[c, x] |= follow[a, x]
                    break
    # the key: per seed in increasing order, its id and its follow context (4 words)
    s0 = seed_start[t]
    finals[:ns].sort()
    for i in range(ns):
        c = finals[i]
        seed_flag[c] = False
        seed_pool[s0 + 5 * i] = c
        for x in range(4):
            seed_pool[s0 + 5 * i + 1 + x] = fctx[c, x]
    seed_start[t + 1] = s0 + 5 * ns
    predicted = _close_pred(lc_start, lc, pred_row, pred_t, stack, finals, ns, t)
    return (VIABLE if (predicted or accepting) else DEAD), accepting


@kernel(nogil=False, nrt=True)
def walk_trie(byte_start, byte_pre, r2_start, r2_lhs, r2_b, r1_start, r1_lhs, r1_c, up_start, up,
              lc_start, lc, follow, start, col_start, col_pool, col_r1, ent_nt, ent_off, ent_lo, pool, pred_row, pred_t,
              seed_start, seed_pool, cur_idx, prev_idx, in_f, finals, seed_flag, fctx, stack, counters, n, follows,
              tbyte, tdepth, tsize, tok_start, tok_ids, out, acc_nodes):
    """Set in ``out`` (uint32 words) every token whose bytes keep the prefix of length n
    viable: depth-first over the trie, one column per node, a dead node's subtree skipped.
    Columns above n are scratch; the committed state (0..n) is unchanged. Returns VIABLE,
    or -t when column t ran out of room (grow, then walk again).

    Classification (``acc_nodes`` non-empty, room for every trie node plus one; n = 0, the
    start X): also list in ``acc_nodes[1:1 + acc_nodes[0]]`` the nodes whose bytes are a
    sentence of X and that have a child whose byte may follow theirs (``follows``): where a
    token may finish an X and go on (classes.py). A leaf is left out: it has no such child."""
    i = 1
    nn = tbyte.shape[0]
    while i < nn:
        t = n + tdepth[i]
        counters[C_TRIE] += 1
        if not _live(byte_start, byte_pre, pred_row, t - 1, tbyte[i]):
            i += tsize[i]
            continue
        # a node none of whose children may follow its byte is a leaf for the walk
        leaf = True
        j = i + 1
        while j < i + tsize[i]:
            if follows[tbyte[i], tbyte[j]]:
                leaf = False
                break
            j += tsize[j]
        st, acc = push_byte(byte_start, byte_pre, r2_start, r2_lhs, r2_b, r1_start, r1_lhs, r1_c,
                            up_start, up, lc_start, lc, follow, start, col_start, col_pool, col_r1, ent_nt, ent_off,
                            ent_lo, pool, pred_row, pred_t, seed_start, seed_pool, cur_idx, prev_idx, in_f, finals,
                            seed_flag, fctx, stack, counters, t, tbyte[i], leaf)
        if st == OVERFLOW:
            return -t  # the column that needs room
        if st == DEAD:
            i += tsize[i]
            continue
        if acc and acc_nodes.shape[0] > 0 and not leaf:
            acc_nodes[0] += 1
            acc_nodes[acc_nodes[0]] = i
        for j in range(tok_start[i], tok_start[i + 1]):
            tid = tok_ids[j]
            out[tid >> 5] |= np.uint32(1) << np.uint32(tid & 31)
        i += tsize[i] if leaf else 1
    return VIABLE
