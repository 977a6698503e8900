"""decode (ids -> str) and streaming decode (one id at a time, as a generation loop does), with peers."""
from .common import CORE_FAMILIES, encoder, load_ctok, peer, require, text

DECODE_CORPUS = "en_dracula.txt"
STREAM_BYTES = 10_000           # a Python call per token; tokenizer.json families re-decode a window: keep it short


class Decode:
    params = (CORE_FAMILIES, ["ctok", "tiktoken", "hf"])
    param_names = ["family", "lib"]
    number = 1
    repeat = (2, 10, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, lib):
        t = text(DECODE_CORPUS)
        if lib == "ctok":
            enc = load_ctok(family)
            self.ids = enc.encode_ordinary(t)
            self.fn = enc.decode
        else:
            obj, fn = peer(lib, family)
            self.ids = fn(t)
            self.fn = obj.decode

    def time_decode(self, family, lib):
        self.fn(self.ids)


class StreamDecode:
    """ctok's Encoding.stream_decoder() against HF's DecodeStream, on ~10 kB of English."""
    params = (CORE_FAMILIES, ["ctok", "hf"])
    param_names = ["family", "lib"]
    number = 1
    repeat = (2, 10, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, lib):
        t = text(DECODE_CORPUS, STREAM_BYTES)
        if lib == "ctok":
            self.enc = load_ctok(family)
            require(self.enc, "stream_decoder")
            self.ids = encoder("ctok", family)(t)
        else:
            obj, fn = peer(lib, family)
            try:
                from tokenizers.decoders import DecodeStream
            except ImportError:
                raise NotImplementedError("tokenizers has no DecodeStream")
            self.obj, self.DecodeStream = obj, DecodeStream
            self.ids = fn(t)

    def time_stream_decode(self, family, lib):
        if lib == "ctok":
            dec = self.enc.stream_decoder()
            step = dec.step
            for i in self.ids:
                step(i)
            dec.flush()
        else:
            ds = self.DecodeStream(skip_special_tokens=False)
            obj = self.obj
            for i in self.ids:
                ds.step(obj, i)
