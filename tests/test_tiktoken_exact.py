"""Exactness of every tiktoken-format family in shared/vocab against tiktoken built from MANIFEST's recipe.

Expected values always come from the reference (tiktoken via ``_shared.reference_encoding``), never from ctok.
"""
import base64
import json
import os
import random
import shutil

import pytest

from _shared import (FAMILY_BY_ID, FULL, TIKTOKEN_FAMILIES, adversarial_dict, adversarial_names, assert_same_ids,
                     corpus_names, corpus_text, reference_encoding, write_first_lines)

tiktoken = pytest.importorskip("tiktoken")
ctok = pytest.importorskip("ctok")

FAMILY_IDS = [f.id for f in TIKTOKEN_FAMILIES]


def load_ctok(family, tmp_path_factory, *, explicit=None):
    """ctok.load for a family: recognised by content, or with pattern=/special_tokens= from the recipe."""
    r = family.recipe_data()
    src = family.source_file()
    if family.view_lines:
        src = write_first_lines(src, tmp_path_factory.mktemp(family.id) / "view.tiktoken", family.view_lines)
    if explicit is None:
        explicit = family.load == "explicit"
    kwargs = dict(pattern=r["pat_str"], special_tokens=r["special_tokens"]) if explicit else {}
    return ctok.load(str(src), **kwargs)


class Case:
    def __init__(self, family, enc, ref):
        self.family, self.enc, self.ref = family, enc, ref

    def __repr__(self):
        return f"Case({self.family.id})"


@pytest.fixture(scope="module", params=FAMILY_IDS)
def case(request, tmp_path_factory):
    family = FAMILY_BY_ID[request.param]
    ref = reference_encoding(family.folder, family.recipe)
    enc = load_ctok(family, tmp_path_factory)
    return Case(family, enc, ref)


def check_encode_all_ways(enc, ref, text, label=""):
    """encode_ordinary, encode(allowed_special="all"), encode() (raise-equivalence) and decode of the ids."""
    exp = ref.encode_ordinary(text)
    assert_same_ids(enc.encode_ordinary(text), exp, text, label + " encode_ordinary:")
    assert enc.decode(exp) == ref.decode(exp)
    assert enc.decode_bytes(exp) == ref.decode_bytes(exp)

    exp_all = ref.encode(text, allowed_special="all")
    assert_same_ids(enc.encode(text, allowed_special="all"), exp_all, text, label + " encode(allowed_special='all'):")
    assert enc.decode(exp_all) == ref.decode(exp_all)

    try:
        exp_default = ref.encode(text)
    except ValueError:
        with pytest.raises(ValueError):
            enc.encode(text)
    else:
        assert_same_ids(enc.encode(text), exp_default, text, label + " encode():")


# --------------------------------------------------------------------------------------------------------------
# metadata


def test_metadata(case):
    enc, ref = case.enc, case.ref
    assert enc.n_vocab == ref.n_vocab
    assert dict(enc.special_tokens) == ref.special_tokens
    if ref.eot_token is not None:
        assert enc.eot_token == ref.eot_token
    else:  # tiktoken has no eot without <|endoftext|>; ctok may name the family's end token or give None
        assert enc.eot_token is None or enc.eot_token in ref.special_tokens.values()
    assert isinstance(enc.name, str) and enc.name


# --------------------------------------------------------------------------------------------------------------
# corpus


@pytest.mark.parametrize("name", corpus_names())
def test_corpus_encode_ordinary(case, name):
    text = corpus_text(name)
    exp = case.ref.encode_ordinary(text)
    assert_same_ids(case.enc.encode_ordinary(text), exp, text, f"{case.family.id}/{name}")
    assert case.enc.decode(exp) == case.ref.decode(exp)
    assert case.enc.decode_bytes(exp) == case.ref.decode_bytes(exp)


@pytest.mark.parametrize("name", corpus_names())
def test_corpus_encode_special(case, name):
    text = corpus_text(name)
    exp = case.ref.encode(text, allowed_special="all")
    assert_same_ids(case.enc.encode(text, allowed_special="all"), exp, text, f"{case.family.id}/{name}")
    try:
        exp_default = case.ref.encode(text)
    except ValueError:
        with pytest.raises(ValueError):
            case.enc.encode(text)
    else:
        assert_same_ids(case.enc.encode(text), exp_default, text, f"{case.family.id}/{name} encode():")


# --------------------------------------------------------------------------------------------------------------
# adversarial strings


@pytest.mark.parametrize("name", adversarial_names())
def test_adversarial(case, name):
    check_encode_all_ways(case.enc, case.ref, adversarial_dict()[name], f"{case.family.id}/{name}")


def test_adversarial_joined(case):
    """All adversarial strings (except the long runs) in one text, so that pieces meet at every kind of seam."""
    texts = [t for n, t in adversarial_dict().items() if not n.startswith("run-")]
    for sep in ("", " ", "\n"):
        check_encode_all_ways(case.enc, case.ref, sep.join(texts), f"{case.family.id}/joined{sep!r}")


# --------------------------------------------------------------------------------------------------------------
# special tokens


def test_special_tokens(case):
    enc, ref = case.enc, case.ref
    names = sorted(ref.special_tokens, key=ref.special_tokens.get)
    picked = names if (FULL or len(names) <= 40) else (
        names[:16] + names[-4:] + random.Random(5).sample(names[16:-4], 20))
    for sp in picked:
        other = names[(names.index(sp) + 1) % len(names)]
        text = f"a {sp}b{sp}\nx{sp}"
        with pytest.raises(ValueError):
            ref.encode(text)
        with pytest.raises(ValueError):
            enc.encode(text)
        assert_same_ids(enc.encode(text, allowed_special="all"), ref.encode(text, allowed_special="all"), text)
        assert ref.special_tokens[sp] in enc.encode(text, allowed_special="all")
        assert_same_ids(enc.encode(text, allowed_special={sp}), ref.encode(text, allowed_special={sp}), text)
        assert_same_ids(enc.encode(text, disallowed_special=()), ref.encode(text, disallowed_special=()), text)
        assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text)
        assert ref.special_tokens[sp] not in enc.encode_ordinary(text)  # special text is plain text here
        if other != sp:
            both = f"{sp} and {other}"
            with pytest.raises(ValueError):
                ref.encode(both, allowed_special={sp})
            with pytest.raises(ValueError):
                enc.encode(both, allowed_special={sp})
            # only `other` is disallowed, and the text holds only `sp`: encoded as ordinary text
            only = f"x{sp}y"
            if other not in only:
                assert_same_ids(enc.encode(only, disallowed_special={other}),
                                ref.encode(only, disallowed_special={other}), only)
        # the special token's own id decodes to its text
        assert enc.decode_single_token_bytes(ref.special_tokens[sp]) == sp.encode("utf-8")
        assert enc.decode([ref.special_tokens[sp]]) == sp


def test_special_tokens_with_frozenset_and_set(case):
    enc, ref = case.enc, case.ref
    sp = min(ref.special_tokens, key=ref.special_tokens.get)
    text = f"hello{sp}world"
    exp = ref.encode(text, allowed_special={sp})
    assert enc.encode(text, allowed_special=frozenset({sp})) == exp
    assert enc.encode(text, allowed_special=set(ref.special_tokens)) == exp


# --------------------------------------------------------------------------------------------------------------
# decode


def test_decode_every_id(case):
    """decode_single_token_bytes for every id, including unused ids and ids just past n_vocab."""
    enc, ref = case.enc, case.ref
    bad = []
    for i in range(ref.n_vocab + 3):
        try:
            exp = ref.decode_single_token_bytes(i)
        except (KeyError, ValueError):
            try:
                got = enc.decode_single_token_bytes(i)
            except (KeyError, ValueError):
                continue
            bad.append((i, "no error", got))
            continue
        try:
            got = enc.decode_single_token_bytes(i)
        except Exception as e:  # noqa: BLE001
            bad.append((i, exp, repr(e)))
            continue
        if got != exp:
            bad.append((i, exp, got))
        if len(bad) > 20:
            break
    assert not bad, f"decode_single_token_bytes differs (id, reference, ctok): {bad[:10]}"


def test_decode_random_ids(case):
    enc, ref = case.enc, case.ref
    rng = random.Random(1234)
    valid = [i for i in range(ref.n_vocab) if ref.is_valid_id(i)]
    specials = sorted(ref.special_tokens.values())
    for k in range(300):
        n = rng.choice([0, 1, 2, 3, 5, 20, 100])
        ids = [rng.choice(valid) for _ in range(n)]
        if k % 5 == 0 and n:
            ids[rng.randrange(n)] = rng.choice(specials)
        assert enc.decode_bytes(ids) == ref.decode_bytes(ids), ids
        assert enc.decode(ids) == ref.decode(ids), ids
        assert enc.decode(ids, errors="replace") == ref.decode(ids, errors="replace"), ids
        assert enc.decode(ids, errors="ignore") == ref.decode(ids, errors="ignore"), ids


def test_decode_splits_multibyte(case):
    """Single-byte tokens that split multi-byte characters: decode replaces like tiktoken; decode_bytes is exact."""
    enc, ref = case.enc, case.ref
    byte_id = {}
    for i in range(ref.n_vocab):
        if ref.is_valid_id(i) and i not in ref.special_tokens.values():
            b = ref.decode_single_token_bytes(i)
            if len(b) == 1:
                byte_id.setdefault(b, i)
    raw = "é中😀a".encode("utf-8")
    ids = [byte_id[bytes([b])] for b in raw]
    for lo in range(len(ids)):
        for hi in range(lo, len(ids) + 1):
            part = ids[lo:hi]
            assert enc.decode_bytes(part) == ref.decode_bytes(part) == raw[lo:hi]
            assert enc.decode(part) == ref.decode(part), part


# --------------------------------------------------------------------------------------------------------------
# random text (hypothesis)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FRAGMENTS = ["a", "A", "z", "é", "É", "ǅ", "中", "日本", "한", "ا", "б", "1", "22", "333", "١", "٣", "１", "½", "Ⅻ",
             " ", "  ", "\t", "\n", "\r\n", "\r", "\u3000", "\xa0", "\u2028", "'", "’", "'s", "'S", "'ll", "'LL",
             "’t", ".", ",", "!", "/", "//", "\\", "<", ">", "|", "<|endoftext|>", "<|endoftext|", "<s>",
             "\u0301", "\u200d", "\ufe0f", "😀", "👍🏽", "\x00", "\ud800", "_", "-", "$", "€", "\U00010d50", "\u0897"]

fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
any_text = st.text(max_size=60)
HYP = settings(max_examples=1000 if FULL else 150, deadline=None, derandomize=bool(os.environ.get("CI")),
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@HYP
@given(text=st.one_of(fragment_text, any_text))
def test_hypothesis_text(case, text):
    check_encode_all_ways(case.enc, case.ref, text, case.family.id)


# --------------------------------------------------------------------------------------------------------------
# loading paths


@pytest.mark.parametrize("family_id", [f.id for f in TIKTOKEN_FAMILIES if f.id != "mistral-tekken"])
def test_explicit_pattern_and_special_tokens(family_id, tmp_path_factory):
    """Passing the recipe's pattern= and special_tokens= gives the same encoding."""
    family = FAMILY_BY_ID[family_id]
    ref = reference_encoding(family.folder, family.recipe)
    enc = load_ctok(family, tmp_path_factory, explicit=True)
    assert dict(enc.special_tokens) == ref.special_tokens
    assert enc.n_vocab == ref.n_vocab
    texts = [t for n, t in adversarial_dict().items() if not n.startswith("run-")]
    check_encode_all_ways(enc, ref, " ".join(texts), family_id)
    for name in corpus_names():
        check_encode_all_ways(enc, ref, corpus_text(name, 8_000), f"{family_id}/{name}")


def test_r50k_view_recognised_by_content(tmp_path):
    family = FAMILY_BY_ID["r50k_base"]
    ref = reference_encoding(family.folder, family.recipe)
    path = write_first_lines(family.source_file(), tmp_path / "first_lines.tiktoken", family.view_lines)
    enc = ctok.load(str(path))
    assert enc.n_vocab == ref.n_vocab == 50257
    assert dict(enc.special_tokens) == ref.special_tokens
    for name in corpus_names():
        check_encode_all_ways(enc, ref, corpus_text(name, 8_000), f"r50k/{name}")


@pytest.mark.parametrize("family_id", ["o200k_base", "qwen-tiktoken"])
def test_recognised_by_content_not_name(family_id, tmp_path):
    family = FAMILY_BY_ID[family_id]
    ref = reference_encoding(family.folder, family.recipe)
    path = tmp_path / "renamed_vocab.tiktoken"
    shutil.copyfile(family.source_file(), path)
    enc = ctok.load(str(path))
    assert dict(enc.special_tokens) == ref.special_tokens
    assert enc.n_vocab == ref.n_vocab
    check_encode_all_ways(enc, ref, corpus_text("udhr_multilingual.txt", 20_000), family_id)


def test_load_folder(tmp_path):
    """A folder holding a tiktoken file loads like the file."""
    family = FAMILY_BY_ID["cl100k_base"]
    ref = reference_encoding(family.folder, family.recipe)
    enc = ctok.load(str(family.source_file().parent))
    assert dict(enc.special_tokens) == ref.special_tokens
    check_encode_all_ways(enc, ref, corpus_text("code_python.txt", 10_000))


def test_custom_pattern():
    """An arbitrary split pattern (no hand-written scanner for it) still matches tiktoken."""
    family = FAMILY_BY_ID["cl100k_base"]
    r = family.recipe_data()
    pat = r"\p{L}+|\p{N}|[^\p{L}\p{N}\s]+|\s+"
    specials = {"<|endoftext|>": 100257}
    from tiktoken.load import load_tiktoken_bpe

    ref = tiktoken.Encoding("custom", pat_str=pat, mergeable_ranks=load_tiktoken_bpe(str(family.source_file())),
                            special_tokens=specials)
    enc = ctok.load(str(family.source_file()), pattern=pat, special_tokens=specials)
    for name in corpus_names():
        text = corpus_text(name, 8_000)
        assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text, name)
    text = " ".join(t for n, t in adversarial_dict().items() if not n.startswith("run-"))
    assert_same_ids(enc.encode(text, allowed_special="all"), ref.encode(text, allowed_special="all"), text)


# --------------------------------------------------------------------------------------------------------------
# embedded encodings


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_get_encoding_embedded(name):
    ref = reference_encoding(name)
    enc = ctok.get_encoding(name)
    assert enc.name == name
    assert enc.n_vocab == ref.n_vocab
    assert dict(enc.special_tokens) == ref.special_tokens
    assert enc.eot_token == ref.eot_token
    for cname in corpus_names():
        check_encode_all_ways(enc, ref, corpus_text(cname), f"{name}/{cname}")
    for aname, text in adversarial_dict().items():
        check_encode_all_ways(enc, ref, text, f"{name}/{aname}")


def test_get_encoding_is_offline_copy_of_shared_files():
    """The embedded files are byte-identical to the shared ones (so the references above apply)."""
    import ctok as _ctok

    data = os.path.join(os.path.dirname(_ctok.__file__), "data")
    for name in ("o200k_base", "cl100k_base"):
        embedded = os.path.join(data, f"{name}.tiktoken")
        if not os.path.exists(embedded):
            pytest.skip("embedded files are not stored as plain .tiktoken files")
        with open(embedded, "rb") as a, open(FAMILY_BY_ID[name].source_file(), "rb") as b:
            assert a.read() == b.read()


# --------------------------------------------------------------------------------------------------------------
# Tekken id layout


def test_tekken_layout():
    family = FAMILY_BY_ID["mistral-tekken"]
    r = family.recipe_data()
    enc = ctok.load(str(family.source_file()))
    specials = dict(enc.special_tokens)
    assert sorted(specials.values()) == list(range(1000))
    assert specials == r["special_tokens"]
    for name, i in [("<unk>", 0), ("<s>", 1), ("</s>", 2), ("[INST]", 3), ("[/INST]", 4), ("<SPECIAL_999>", 999)]:
        assert specials[name] == i
    assert enc.n_vocab == 131072
    with open(family.source_file(), encoding="utf-8") as f:
        vocab = json.load(f)["vocab"]
    rng = random.Random(7)
    for rank in [0, 1, 255, 256, 1000, 130071] + rng.sample(range(130072), 200):
        assert vocab[rank]["rank"] == rank
        assert enc.decode_single_token_bytes(rank + 1000) == base64.b64decode(vocab[rank]["token_bytes"])
    # ranks beyond the default vocabulary (130072..149999) are not part of it
    for tid in (131072, 131073, 150999):
        with pytest.raises((KeyError, ValueError)):
            enc.decode_single_token_bytes(tid)
    ids = enc.encode_ordinary(corpus_text("udhr_multilingual.txt", 20_000))
    assert min(ids) >= 1000
    assert enc.encode("<s>[INST] hi [/INST]", allowed_special="all")[:2] == [1, 3]


def test_reference_adapter_matches_shifted_tiktoken():
    """Harness self-check: the Tekken reference adapter equals a tiktoken Encoding whose ranks are shifted by
    1000 (the same merge order) with the specials at 0..999."""
    family = FAMILY_BY_ID["mistral-tekken"]
    ref = reference_encoding(family.folder, family.recipe)
    shifted = tiktoken.Encoding("shifted", pat_str=ref.enc._pat_str,
                                mergeable_ranks={k: v + 1000 for k, v in ref.enc._mergeable_ranks.items()},
                                special_tokens=ref.special_tokens)
    for name, text in adversarial_dict().items():
        assert ref.encode_ordinary(text) == shifted.encode_ordinary(text), name
        assert ref.encode(text, allowed_special="all") == shifted.encode(text, allowed_special="all"), name
        try:
            exp = shifted.encode(text)
        except ValueError:
            with pytest.raises(ValueError):
                ref.encode(text)
        else:
            assert ref.encode(text) == exp, name
