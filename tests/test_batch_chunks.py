"""The shrinking chunks a batch is cut into for the pool (Encoding._chunks) and the flat ids handed on without a
copy (IdBuffer): results equal per-text encodes by the reference (tiktoken), in order, for every thread count."""
import gc
import random

import pytest

from _shared import assert_same_ids, corpus_names, corpus_text

ctok = pytest.importorskip("ctok")
np = pytest.importorskip("numpy")
pytest.importorskip("tiktoken")


def _batch(count, seed):
    """`count` texts of 0-3,000 characters from every corpus file, empty ones among them (some in runs), and one
    text of 70,000 characters."""
    rnd = random.Random(seed)
    sources = [corpus_text(n, 40_000) for n in corpus_names()]
    texts = []
    for i in range(count):
        src = rnd.choice(sources)
        n = rnd.choice([0, 0, 1, 7, 50, 400, 1200, 3000])
        a = rnd.randrange(0, max(1, len(src) - n))
        texts.append(src[a:a + n])
    texts.insert(count // 2, sources[0][:70_000])
    return texts


@pytest.mark.parametrize("num_threads", [1, 2, 3, 8])
def test_large_batch_equals_per_text(o200k, o200k_ref, num_threads):
    texts = _batch(900, num_threads)
    assert sum(len(t.encode("utf-8")) for t in texts) > 1 << 19         # many chunks at every thread count
    want = [o200k_ref.encode_ordinary(t) for t in texts]
    got = o200k.encode_ordinary_batch(texts, num_threads=num_threads)
    assert len(got) == len(texts)
    for t, g, w in zip(texts, got, want):
        assert_same_ids(g, w, t)
    assert o200k.encode_batch(texts, num_threads=num_threads) == want
    ids, offsets = o200k.encode_batch_flat(texts, num_threads=num_threads)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want


def test_core_batch_bytes_and_str_items(o200k, o200k_ref):
    """The core's own entry points, bytes and str items mixed, runs of empty texts."""
    texts = _batch(300, 11)
    items = [t.encode("utf-8") if i % 3 == 0 else t for i, t in enumerate(texts)]
    items[10:10] = [b""] * 5 + [""] * 5
    want = [o200k_ref.encode_ordinary(t if isinstance(t, str) else t.decode("utf-8")) for t in items]
    assert o200k._core.encode_many(items) == want
    assert o200k._core.encode_many([]) == []
    buf, ends = o200k._core.encode_many_flat(items)
    ids, ends = np.frombuffer(buf, dtype=np.uint32).tolist(), [0] + np.frombuffer(ends, dtype=np.int64).tolist()
    assert [ids[ends[i]:ends[i + 1]] for i in range(len(items))] == want


def test_flat_ids_are_a_writable_buffer_that_outlives_the_call(o200k, o200k_ref):
    texts = _batch(60, 5)
    want = [i for t in texts for i in o200k_ref.encode_ordinary(t)]
    buf, ends = o200k._core.encode_many_flat(texts)
    assert len(buf) == 4 * len(want)
    view = memoryview(buf)
    assert view.format == "I" and view.itemsize == 4 and not view.readonly and view.tolist() == want
    view.release()
    arr = np.frombuffer(buf, dtype=np.uint32)
    del buf
    gc.collect()
    assert arr.tolist() == want
    assert np.frombuffer(ends, dtype=np.int64)[-1] == len(want)
    for num_threads in (1, 2):
        ids, offsets = o200k.encode_batch_flat(texts, num_threads=num_threads)
        assert ids.flags.writeable
        ids[:] = 0                              # the caller owns the array: writing it is allowed
        assert o200k.encode_batch_flat(texts, num_threads=num_threads)[0].tolist() == want
    empty, ends = o200k._core.encode_many_flat(["", ""])
    assert len(empty) == 0 and np.frombuffer(empty, dtype=np.uint32).tolist() == []
    assert np.frombuffer(ends, dtype=np.int64).tolist() == [0, 0]


@pytest.mark.parametrize("num_threads", [2, 3, 8])
def test_chunks_cover_the_batch_in_order(o200k, num_threads):
    texts = _batch(500, 3)
    chunks = o200k._chunks(texts, num_threads)
    assert [t for c in chunks for t in c] == texts
    assert all(chunks)
    sizes = [sum(map(len, c)) for c in chunks]
    assert len(chunks) > num_threads                 # more chunks than threads: the finish is shared
    assert max(sizes[-num_threads:]) < sizes[0]      # the last chunks are the small ones
    for few in ([], ["x"], ["", ""], ["", "abc", ""]):
        assert [t for c in o200k._chunks(few, num_threads) for t in c] == few


def _chunk_ends_model(lengths, threads):
    # The rule Encoding._chunks documents, written out: each chunk closed by the first item whose end reaches a
    # 1/(2 threads) share of what is left (at least 1/(32 threads) of the whole), at least one item per chunk.
    total = sum(lengths)
    floor = max(1, total // (32 * threads))
    ends, i, done, acc = [], 0, 0, []
    for n in lengths:
        acc.append((acc[-1] if acc else 0) + n)
    while i < len(lengths):
        target = done + max((total - done) // (2 * threads), floor)
        j = next((k for k in range(i, len(lengths)) if acc[k] >= target), len(lengths) - 1) + 1
        ends.append(j)
        done, i = acc[j - 1], j
    return ends


def test_chunk_ends_follow_the_rule():
    from ctok._encoder import chunk_ends
    rnd = random.Random(5)
    for _ in range(300):
        count = rnd.choice([1, 2, 3, 10, 200])
        items = [rnd.choice(["", "x" * rnd.randint(1, 50), "é" * rnd.randint(1, 3000), b"y" * rnd.randint(0, 900),
                             "\U0001F642" * rnd.randint(1, 20)]) for _ in range(count)]
        threads = rnd.choice([1, 2, 3, 8])
        lengths = [len(t) for t in items]
        assert chunk_ends(items, threads) == (_chunk_ends_model(lengths, threads), max(lengths))
    assert chunk_ends([], 2) == ([], 0)
    with pytest.raises(ValueError):
        chunk_ends(["a"], 0)


def test_copy_ids_refuses_parts_past_the_end(o200k):
    from ctok._encoder import copy_ids
    buf, _ = o200k._core.encode_many_flat(["hello world", "more text here"])
    n = len(buf) // 4
    out = np.zeros(n + 3, dtype=np.uint32)
    copy_ids(out, [buf], [3])
    assert out[3:].tolist() == np.frombuffer(buf, dtype=np.uint32).tolist() and out[:3].tolist() == [0, 0, 0]
    for start in (4, n + 4, -1):
        with pytest.raises(ValueError):
            copy_ids(out, [buf], [start])
    with pytest.raises(ValueError):
        copy_ids(out, [buf, buf], [0])
    with pytest.raises(TypeError):
        copy_ids(out, [b"\0\0\0\0"], [0])


@pytest.mark.parametrize("num_threads", [1, 2])
def test_batch_lists_hold_one_reference_per_place(o200k, num_threads):
    # A batch's lists take each distinct id's references at once (_int_list.h, ctok_int_lists): an id's int
    # object's count goes up by at least the places it fills, and back to where it was when the lists go.
    import sys
    texts = _batch(300, 9)
    first = o200k.encode_ordinary_batch(texts, num_threads=num_threads)
    assert sum(map(len, first)) >= 4096                   # the batch's way, not one list at a time
    objs = {}
    for ids in first:
        for x in ids:
            if x > 256:                                   # small ints are shared (and immortal from 3.12 on)
                objs.setdefault(x, x)
    sample = sorted(objs)[::max(1, len(objs) // 200)]
    places = {}
    for ids in first:
        for x in ids:
            places[x] = places.get(x, 0) + 1
    del ids, x                                            # no reference left to any sampled int but the lists'
    before = _refcounts(objs, sample)                     # measured outside asserts (pytest keeps their values)
    again = o200k.encode_ordinary_batch(texts, num_threads=num_threads)
    during = _refcounts(objs, sample)
    same = again == first
    del again
    after = _refcounts(objs, sample)
    assert same
    # each place holds one (the encoder may keep more while the lists live), and exactly what was taken is given
    # back when they go
    assert all(d - b >= places[x] for x, b, d in zip(sample, before, during))
    assert after == before


def _refcounts(objs, sample):
    import sys
    return [sys.getrefcount(objs[x]) for x in sample]


def test_id_lists_are_not_tracked_by_the_garbage_collector(o200k):
    # Lists of ints are in no reference cycle: ctok leaves them out of the collector's lists (_int_list.h), single
    # and batch lists alike, and they stay ordinary lists.
    import gc
    texts = _batch(300, 4)
    lists = o200k.encode_ordinary_batch(texts, num_threads=2) + o200k.encode_batch(texts[:50]) + [
        o200k.encode("hello world"), o200k.encode_ordinary(texts[7]), o200k.encode("")]
    assert sum(map(len, lists)) >= 4096
    assert not any(gc.is_tracked(ids) for ids in lists)
    ids = lists[-2]
    ids.append(7)                                         # still a list like any other
    assert ids[-1] == 7 and type(ids) is list
