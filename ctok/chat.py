"""Chat templates: `Encoding.apply_chat_template`, rendered and encoded as transformers does.

A model folder carries its chat template as a Jinja template, in one of these places (transformers' order):
`chat_template.jinja` (plus named templates in `additional_chat_templates/*.jinja`), which replace whatever
`tokenizer_config.json` says; else the config's `chat_template`, a string or a list of `{"name", "template"}`.
The template sees `messages`, `tools`, `documents`, `add_generation_prompt`, the config's named special tokens
(`bos_token`, `eos_token`, ... and any other `*_token` key), and the caller's keyword arguments.

Rendering follows transformers 5 exactly: an immutable Jinja sandbox with `trim_blocks` and `lstrip_blocks`,
`raise_exception`, `strftime_now`, a `tojson` that does not escape HTML, the `{% generation %}` tag, loop
controls; messages rebuilt from plain JSON types with None-valued keys dropped; reasoning fields aliased;
`continue_final_message`.  The rendered text is encoded with every special and added token recognised and no
BOS/EOS template (`add_special_tokens=False`), which is what makes the template's own control tokens count.

That is also why, by default, a user who types `<|im_end|>` into a message injects a real control token (as
with transformers).  `sanitize_control_tokens=True` prevents it: control tokens inside the caller's strings are
marked before rendering, and after rendering those spans are encoded as plain text while the template's text
stays trusted -- the same marking, splitting and encoding as transformers' option of that name.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from .errors import ChatInputError, ChatTemplateError, MissingDependencyError

TEMPLATE_FILE = "chat_template.jinja"
TEMPLATE_DIR = "additional_chat_templates"
CONFIG_FILE = "tokenizer_config.json"
# transformers' named special-token attributes; any other `*_token` config key is a template variable too.
NAMED_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# Names a message's reasoning may come under; templates read the first.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
# Appended to the message being continued, so the end of its text can be found in the rendered chat.
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
# Private-use code points wrapped around control tokens in the caller's strings (transformers uses the same two,
# which keeps rendering identical to its sanitize mode).
MARK_OPEN, MARK_CLOSE = "\U000f0000", "\U000f0001"
MIN_JINJA = (3, 1, 6)   # older versions have known sandbox escapes, and templates are untrusted code


# ---------------------------------------------------------------------------------------------------------------
# Where the template and the token variables come from


class ChatConfig:
    """What one tokenizer folder says about chat: its template(s) and the special-token variables."""

    def __init__(self, folder: str, templates, token_vars: Dict[str, str], control_tokens: Optional[List[str]],
                 looked_in: str):
        self.folder = folder
        self.templates = templates              # None, a template string, or {name: template}
        self.token_vars = token_vars
        self.control_tokens = control_tokens    # the config's chat_control_tokens, if it lists them
        self.looked_in = looked_in
        self._patterns = {}                     # template source -> (control-token regex, marker regex)

    def select(self, chat_template: Optional[str], tools) -> str:
        """The template source to render, chosen as transformers' get_chat_template does."""
        templates = self.templates
        if isinstance(templates, dict):
            if chat_template is not None and chat_template in templates:
                return templates[chat_template]
            if chat_template is None:
                if tools is not None and "tool_use" in templates:
                    return templates["tool_use"]
                if "default" in templates:
                    return templates["default"]
                raise ChatTemplateError(
                    f"{self.looked_in}: several chat templates and none is named 'default': pass "
                    f"chat_template= one of {sorted(templates)} (or a template string)")
            return chat_template
        if chat_template is not None:
            return chat_template
        if templates is None:
            raise ChatTemplateError(
                f"no chat template for this tokenizer: looked for {TEMPLATE_FILE}, {TEMPLATE_DIR}/*.jinja and a "
                f"'chat_template' field in {CONFIG_FILE}, in {self.looked_in}; pass chat_template=... to "
                "apply_chat_template to give one")
        return templates


def _token_text(value) -> Optional[str]:
    """A special token given in a config: a string, or an AddedToken object ({"content": ...})."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise ChatTemplateError(f"{path}: not UTF-8 text ({e})") from None


def read_chat_config(source: Optional[str]) -> ChatConfig:
    """The chat template(s) and token variables of the folder holding the tokenizer file `source`."""
    from .loaders import read_sibling_config
    if not source:
        return ChatConfig("", None, {}, None, "(no tokenizer file: this encoding was not loaded from a folder)")
    folder = os.path.dirname(os.path.abspath(source))
    cfg = read_sibling_config(source) or {}
    cfg_path = os.path.join(folder, CONFIG_FILE)

    file_templates = {}
    main = os.path.join(folder, TEMPLATE_FILE)
    if os.path.isfile(main):
        file_templates["default"] = _read_text(main)
    extra_dir = os.path.join(folder, TEMPLATE_DIR)
    if os.path.isdir(extra_dir):
        for name in sorted(os.listdir(extra_dir)):
            if name.endswith(".jinja") and os.path.isfile(os.path.join(extra_dir, name)):
                file_templates[name[:-len(".jinja")]] = _read_text(os.path.join(extra_dir, name))

    if file_templates:
        # Template files win over the config's field, whatever it holds.
        templates = file_templates["default"] if list(file_templates) == ["default"] else file_templates
    else:
        templates = cfg.get("chat_template")
        if isinstance(templates, (list, tuple)):
            named = {}
            for i, entry in enumerate(templates):
                if not (isinstance(entry, Mapping) and isinstance(entry.get("name"), str)
                        and isinstance(entry.get("template"), str)):
                    raise ChatTemplateError(
                        f"{cfg_path}: field chat_template[{i}]: expected an object with string 'name' and 'template'")
                named[entry["name"]] = entry["template"]
            templates = named
        elif isinstance(templates, Mapping):
            templates = dict(templates)
        elif templates is not None and not isinstance(templates, str):
            raise ChatTemplateError(f"{cfg_path}: field chat_template: expected a string or a list of templates")
        if isinstance(templates, dict):
            for name, t in templates.items():
                if not isinstance(t, str):
                    raise ChatTemplateError(f"{cfg_path}: chat template {name!r}: expected a string")

    token_vars: Dict[str, str] = {}
    for key, value in cfg.items():
        if key in NAMED_TOKEN_KEYS or (isinstance(key, str) and key.endswith("_token")):
            text = _token_text(value)
            if text is not None:
                token_vars[key] = text
    extra = cfg.get("extra_special_tokens")
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            text = _token_text(value)
            if text is not None:
                token_vars[key] = text

    control = cfg.get("chat_control_tokens")
    if control is not None and not (isinstance(control, (list, tuple)) and all(isinstance(c, str) for c in control)):
        raise ChatTemplateError(f"{cfg_path}: field chat_control_tokens: expected a list of strings")
    looked_in = folder if not os.path.isfile(cfg_path) else f"{folder} ({CONFIG_FILE} has no chat_template)"
    return ChatConfig(folder, templates, token_vars, list(control) if control is not None else None, looked_in)


def chat_config(enc) -> ChatConfig:
    cfg = enc._chat
    if cfg is None:
        cfg = enc._chat = read_chat_config(enc.source)
    return cfg


# ---------------------------------------------------------------------------------------------------------------
# The Jinja environment


@lru_cache(maxsize=1)
def _environment():
    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise MissingDependencyError("apply_chat_template needs jinja2 >= 3.1.6: pip install 'jinja2>=3.1.6'") from None
    version = tuple(int(p) for p in re.findall(r"\d+", jinja2.__version__)[:3])
    if version < MIN_JINJA:
        raise MissingDependencyError(
            f"apply_chat_template needs jinja2 >= 3.1.6 (older versions have sandbox escapes); "
            f"jinja2 {jinja2.__version__} is installed")

    class GenerationTag(jinja2.ext.Extension):
        # `{% generation %}...{% endgeneration %}` marks assistant text (for training masks); rendering just emits
        # the body.  The body runs as a call block, so its scope is the one transformers gives it.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_emit"), [], [], body).set_lineno(lineno)

        def _emit(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # Jinja's own tojson escapes <, >, & and ' for HTML, which would change the prompt.
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    def no_private(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates may not store underscore-prefixed attributes on a namespace ({name!r})")

    class GuardedNamespace(jinja2.utils.Namespace):
        # A namespace's attributes are not checked by the sandbox; refuse the private ones.
        def __init__(*args, **kwargs):
            for name in dict(*args[1:], **kwargs):
                no_private(name)
            jinja2.utils.Namespace.__init__(*args, **kwargs)

        def __setitem__(self, name, value):
            no_private(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

    class DictFactory:
        # `dict(...)` in templates, without handing them the type object itself.
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, dict=DictFactory(),
                       namespace=GuardedNamespace)
    return env


def _template_error(e: Exception, what: str) -> ChatTemplateError:
    return ChatTemplateError(f"{what}: {type(e).__name__}: {e}")


@lru_cache(maxsize=64)
def _compiled(source: str):
    env = _environment()
    import jinja2
    try:
        return env.from_string(source)
    except jinja2.TemplateError as e:
        raise _template_error(e, "the chat template does not compile") from e


@lru_cache(maxsize=64)
def _literal_text(source: str) -> str:
    """The template's own strings (its text and string constants), NUL-separated so no match spans two."""
    import jinja2.nodes
    ast = _environment().parse(source)
    parts = {n.data for n in ast.find_all(jinja2.nodes.TemplateData)}
    parts |= {n.value for n in ast.find_all(jinja2.nodes.Const) if isinstance(n.value, str)}
    return "\0".join(sorted(parts))


# ---------------------------------------------------------------------------------------------------------------
# What the template sees


def _plain(value: Any) -> Any:
    """`value` rebuilt from JSON-like types only; anything else becomes a "<TypeName>" placeholder.  Templates
    come from model hubs: rich objects (arrays, images, ...) could offer methods the sandbox does not know to be
    dangerous, and templates only test such values for presence."""
    t = type(value)
    if value is None or t in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if t.__module__ == "numpy":
        import numpy as np
        if isinstance(value, np.generic):
            return _plain(value.item())        # numpy scalars (np.bool_(False) must stay falsy)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())      # pydantic models, e.g. OpenAI SDK messages
    return f"<{t.__name__}>"


def _message(m) -> dict:
    m = _plain(m)
    if not isinstance(m, dict):
        raise ChatInputError(f"chat messages must be mappings (or dataclasses / pydantic models), not {m!r}")
    # APIs send `content=None` or `tool_calls=None`; templates handle a missing key but not a None one.
    return {k: v for k, v in m.items() if v is not None}


def _with_reasoning_aliases(m: dict) -> dict:
    reasoning = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
    if reasoning is None:
        return m
    return {"thinking": reasoning, **m, "reasoning_content": reasoning}


def _mark(value, control_re):
    """Control tokens in the caller's strings wrapped in the private markers (any markers already there are
    dropped first, so they cannot be forged); containers walked, keys left alone."""
    if isinstance(value, str):
        value = value.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")
        return control_re.sub(lambda m: MARK_OPEN + m.group() + MARK_CLOSE, value)
    if isinstance(value, dict):
        return {k: _mark(v, control_re) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mark(v, control_re) for v in value]
    return value


def _alternation(tokens) -> str:
    # Longest first: of two tokens starting at one place, the longer wins.
    return "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)) or "(?!)"


def _is_batch(conversation) -> bool:
    return (isinstance(conversation, (list, tuple)) and len(conversation) > 0
            and (isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages")))


def _tools(tools):
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, (list, tuple)):
        raise ChatInputError(f"tools must be a list of JSON-schema mappings, not {type(tools).__name__}")
    out = []
    for tool in tools:
        if isinstance(tool, Mapping):
            out.append(tool)
        elif callable(tool):
            raise ChatInputError(
                f"tool {getattr(tool, '__name__', tool)!r} is a function: ctok takes tools as JSON schemas "
                "(transformers.utils.get_json_schema(fn) makes one from a function's type hints and docstring)")
        else:
            raise ChatInputError(f"each tool must be a JSON-schema mapping, not {type(tool).__name__}")
    return _plain(out)


def _documents(documents):
    if documents is None:
        return None
    out = []
    for d in documents:
        if not isinstance(d, Mapping):
            raise ChatInputError(f"documents must be mappings (e.g. with 'title' and 'text'), not {type(d).__name__}")
        out.append(d)
    return _plain(out)


# ---------------------------------------------------------------------------------------------------------------
# Rendering and encoding


def _render_one(template, source: str, messages: list, tools, documents, add_generation_prompt: bool,
                continue_final_message, variables: dict) -> str:
    chat = [_with_reasoning_aliases(m) for m in messages]
    final_text = None
    if continue_final_message:
        if not chat:
            raise ChatTemplateError("continue_final_message is set but the conversation is empty")
        field = continue_final_message if isinstance(continue_final_message, str) else "content"
        final_text = chat[-1].get(field)
        if final_text is None:
            raise ChatTemplateError(f"continue_final_message is set but the final message has no {field!r}")
        fields = [field]
        if field in REASONING_FIELDS:
            # Reasoning sits under several names after aliasing: tag every copy the template might read.
            fields = [f for f in REASONING_FIELDS if chat[-1].get(f) == final_text]
        if not any(f in source for f in fields):
            raise ChatTemplateError(
                f"continue_final_message is set to {field!r}, but the chat template does not use that field")
        last = dict(chat[-1])
        if not isinstance(final_text, (str, list, tuple)):
            raise ChatTemplateError(f"continue_final_message: the final message's {field!r} is not text")
        if isinstance(final_text, (list, tuple)):
            blocks = [dict(b) if isinstance(b, dict) else b for b in final_text]
            for block in reversed(blocks):
                if isinstance(block, dict) and "text" in block:
                    final_text = block["text"]
                    block["text"] = block["text"] + CONTINUE_TAG
                    break
            else:
                raise ChatTemplateError(
                    "continue_final_message is set but the final message has no text block to continue")
            last[field] = blocks
        else:
            for f in fields:
                last[f] = last[f] + CONTINUE_TAG
        chat[-1] = last
    try:
        rendered = template.render(messages=chat, tools=tools, documents=documents,
                                   add_generation_prompt=add_generation_prompt, **variables)
    except ChatTemplateError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure inside the template is reported as the template's
        raise _template_error(e, "the chat template failed while rendering") from e
    if final_text is not None:
        tag = CONTINUE_TAG.strip()
        if not isinstance(final_text, str) or final_text.strip() not in rendered or tag not in rendered:
            raise ChatTemplateError(
                "continue_final_message is set but the final message does not appear in the rendered chat (the "
                "template changes or drops it)")
        at = rendered.rindex(tag)
        if rendered[at:at + len(CONTINUE_TAG)] == CONTINUE_TAG:
            rendered = rendered[:at]
        else:
            # The template trimmed the message's trailing space, and the tag's with it.
            rendered = rendered[:at].rstrip()
    return rendered


def _added_tokens(enc) -> List[Tuple[str, bool]]:
    """(content, special) of every added token, by id."""
    if enc._hf is not None:
        return [(t.content, bool(t.special)) for _, t in sorted(enc._hf._added_r.items())]
    return [(name, True) for name, _ in sorted(enc.special_tokens.items(), key=lambda kv: kv[1])]


def control_tokens(enc, source: str, cfg: ChatConfig) -> List[str]:
    """The tokens that user strings may not produce: every special token, plus the non-special added tokens the
    config lists in chat_control_tokens or, failing that, those the template itself writes (whitespace tokens
    excepted: templates hold newlines and spaces as ordinary text)."""
    added = _added_tokens(enc)
    if cfg.control_tokens is not None:
        listed = set(cfg.control_tokens)
        return [c for c, special in added if special or c in listed]
    literal = _literal_text(source)
    return [c for c, special in added if special or (c in literal and not c.isspace())]


def _token_id(enc, text: str) -> Optional[int]:
    if enc._hf is not None:
        return enc._hf.token_to_id(text)
    return enc.special_tokens.get(text)


def _patterns(enc, source: str, cfg: ChatConfig):
    """(regex of the control tokens, regex of a marked token or a lone marker), built once per template."""
    pats = cfg._patterns.get(source)
    if pats is None:
        control_re = re.compile(_alternation(control_tokens(enc, source, cfg)))
        everything = [c for c, _ in _added_tokens(enc)]
        markers_re = re.compile(f"{MARK_OPEN}({_alternation(everything)}){MARK_CLOSE}|[{MARK_OPEN}{MARK_CLOSE}]")
        if len(cfg._patterns) >= 16:
            cfg._patterns.clear()
        pats = cfg._patterns[source] = (control_re, markers_re)
    return pats


def encode_marked(enc, rendered: str, markers) -> List[int]:
    """Ids of a chat rendered from marked input: marked control tokens as plain text, the rest with every
    special and added token recognised."""
    def trusted(text):
        return enc.encode(text, allowed_special="all", disallowed_special=())

    parts = markers.split(rendered)
    newline = trusted("\n")
    ids = trusted(parts[0])
    # parts alternate: text, marked token (None for a lone marker, which is dropped but still separates the text
    # on its two sides), text, ...
    for i in range(1, len(parts)):
        piece = parts[i]
        if not piece:
            continue
        as_text = i % 2 == 1
        encode = enc._encode_no_added if as_text else trusted
        # Encoded after a newline that is then removed, so a SentencePiece tokenizer does not add the space it
        # puts at the start of a text; as transformers does, to give the same ids.
        got = encode("\n" + piece)
        got = got[len(newline):] if got[:len(newline)] == newline else encode(piece)
        if as_text:
            tid = _token_id(enc, piece)
            if tid is not None and tid in got:
                raise ChatTemplateError(
                    f"cannot sanitize {piece!r}: this tokenizer produces that token from plain text")
        ids += got
    return ids


def apply_chat_template(enc, conversation, *, add_generation_prompt=False, tokenize=True, tools=None,
                        documents=None, chat_template=None, continue_final_message=False,
                        sanitize_control_tokens=False, **kwargs):
    """See `Encoding.apply_chat_template`."""
    cfg = chat_config(enc)
    source = cfg.select(chat_template, tools)
    if not isinstance(source, str):
        raise ChatTemplateError(f"chat_template must be a template string or a template name, not {source!r}")
    template = _compiled(source)
    if continue_final_message and add_generation_prompt:
        raise ChatTemplateError(
            "continue_final_message and add_generation_prompt exclude each other: continue_final_message lets the "
            "model continue the last message, add_generation_prompt starts a new assistant message")
    if sanitize_control_tokens and not tokenize:
        raise ChatTemplateError("sanitize_control_tokens=True needs tokenize=True (the protection is in the ids)")

    batched = _is_batch(conversation)
    conversations = conversation if batched else [conversation]
    chats = []
    for conv in conversations:
        conv = getattr(conv, "messages", conv)
        if isinstance(conv, (str, bytes, Mapping)) or not isinstance(conv, (list, tuple)):
            raise ChatInputError(f"a conversation must be a list of messages, not {type(conv).__name__}")
        if not conv:
            raise ChatTemplateError("cannot apply a chat template to an empty conversation")
        chats.append([_message(m) for m in conv])
    tools = _tools(tools)
    documents = _documents(documents)
    kwargs = _plain(kwargs)

    if sanitize_control_tokens:
        control_re, markers_re = _patterns(enc, source, cfg)
        chats = [_mark(c, control_re) for c in chats]
        tools = _mark(tools, control_re)
        documents = _mark(documents, control_re)
        kwargs = _mark(kwargs, control_re)
    variables = {**cfg.token_vars, **kwargs}

    out = []
    for chat in chats:
        rendered = _render_one(template, source, chat, tools, documents, bool(add_generation_prompt),
                               continue_final_message, variables)
        if not tokenize:
            out.append(rendered)
        elif sanitize_control_tokens:
            out.append(encode_marked(enc, rendered, markers_re))
        else:
            out.append(enc.encode(rendered, allowed_special="all", disallowed_special=()))
    return out if batched else out[0]
