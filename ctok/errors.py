"""ctok's exceptions.

Every error ctok raises on purpose derives from `CtokError`, and also from the builtin a caller would
naturally catch (`ValueError` for bad files or text, `NotImplementedError` for unsupported features), so that
`except ValueError` keeps working for code written against tiktoken.
"""


class CtokError(Exception):
    """Base class of every error raised by ctok on purpose."""


class VocabFormatError(ValueError, CtokError):
    """A vocabulary file is malformed.  The message names the file and the line or field."""

    def __init__(self, path, detail):
        self.path = str(path)
        self.detail = detail
        super().__init__(f"{self.path}: {detail}")


class UnsupportedFeatureError(NotImplementedError, CtokError):
    """A tokenizer file uses a component ctok does not implement (named in the message).

    `ctok.load(..., fallback="hf")` hands such files to HuggingFace tokenizers explicitly.
    """

    def __init__(self, path, detail):
        self.path = str(path)
        self.detail = detail
        super().__init__(f"{self.path}: not supported by ctok: {detail} "
                         f"(ctok.load(..., fallback='hf') hands this file to HuggingFace tokenizers)")


class UnknownPatternError(ValueError, CtokError):
    """A tiktoken rank file whose vocabulary ctok does not recognise was loaded without `pattern=`."""


class DisallowedSpecialError(ValueError, CtokError):
    """The text holds a special token's text that the caller did not allow (tiktoken's policy)."""


class UnknownTokenError(ValueError, CtokError):
    """A token id that is not in the vocabulary was given to decode."""

    def __init__(self, token):
        self.token = token
        super().__init__(f"unknown token id {token!r}")


class ChatTemplateError(ValueError, CtokError):
    """`apply_chat_template` cannot render: the tokenizer has no chat template (the message names the files
    looked for), the template is malformed or raised an error itself (`raise_exception`), or the messages do
    not fit it."""


class ChatInputError(TypeError, CtokError):
    """A chat message, tool or document has the wrong type (messages and documents must be mappings, tools
    JSON-schema mappings)."""


class MissingDependencyError(ImportError, CtokError):
    """An optional feature needs a package that is not installed (the message names it)."""


class UnsupportedOptionError(ValueError, CtokError):
    """An option was given that does not apply to this kind of encoding."""


class InvalidTextError(ValueError, CtokError):
    """Text that is not valid Unicode (it holds a lone surrogate) given to a tokenizer.json pipeline, which needs
    valid text as HF tokenizers does (tiktoken-format files replace lone surrogates with U+FFFD, as tiktoken)."""
