"""Prompts that share a prefix, as an LLM server sees them: many requests with one long system prompt, and a
chat that grows by one turn per request.  Whatever ctok reuses between such calls (its prefix cache) shows here;
the peers encode each prompt from scratch (fastokens has its own segment cache)."""
from .common import encoder, text

SYSTEM_BYTES = 20_000          # a long system prompt / tool definitions
N_PROMPTS = 40


def prompts(kind):
    system = text("en_python_docs.rst.txt", SYSTEM_BYTES)
    turns = [p for p in text("en_dracula.txt", 200_000).split("\n\n") if p][:N_PROMPTS]
    if kind == "shared-system-prompt":
        return [system + "\n\n" + t for t in turns]
    out, chat = [], system
    for t in turns:                                   # growing-chat: each prompt extends the previous one
        chat += "\n\n" + t
        out.append(chat)
    return out


class SharedPrefixPrompts:
    params = (["o200k_base", "llama3-hf"], ["shared-system-prompt", "growing-chat"],
              ["ctok", "tiktoken", "hf", "fastokens"])
    param_names = ["family", "prompts", "lib"]
    number = 1
    repeat = (2, 10, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, kind, lib):
        self.fn = encoder(lib, family)
        self.prompts = prompts(kind)

    def time_encode_prompts(self, family, kind, lib):
        fn = self.fn
        for p in self.prompts:
            fn(p)
