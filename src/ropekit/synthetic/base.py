"""What every synthetic task shares: samples, haystacks of an exact token count, needle placement, random words.

A sample is built from token-id pieces, each encoded once with the model's own tokenizer and then concatenated
(never re-tokenized as one string), so its length in tokens is exact by construction: the haystack is cut to
exactly the tokens that the needles, the question and (for training) the answer leave. RULER (Hsieh et al., arXiv
2404.06654) fits its haystacks by a binary search on the amount of filler; the word-list tasks here do the same
(:func:`largest_fitting`) and then pad with the haystack to the exact count.

The pieces are joined only where the tokenizer itself splits the text, so that the sample's text, decoded and
tokenized whole (as RULER tokenizes, and as lm-eval and text-only servers do), gives back its ids. Every piece
carries its space in front, never behind (``" The grass is green. ..."``, a needle ``" The magic number for X is
1234567."``, an answer ``" 1234567"``, the question ``" \nWhat is ..."``), so every join is a non-space character
followed by a space: a split of every common tokenizer family. Byte-level BPE splits there by its regex (GPT-2's,
Llama 3's and Qwen2's; the latter two keep punctuation with the newlines after it, which is why the question starts
with ``" \n"`` rather than ``"\n"``), SentencePiece BPE (Llama 2, Mistral, Gemma) because its pieces start at a ``▁``
and hold none after it, and the byte tokenizer trivially. A tokenizer that puts a space in front of whatever it
encodes (SentencePiece's dummy prefix) encodes a piece without its own leading space (:meth:`Pieces.once`). A text
haystack (a slice of the evaluation text's ids) is cut only before a token that starts with a space after one that
ends in a non-space character (:meth:`Pieces.cuts`, from each token's text after a word); the needles go in at such
cuts too. A noise or distractor haystack cut short at its end ends on such a cut where the cut word would not read
back alone (:meth:`Haystack.stream`). A vocabulary with pieces that hold a space after their start can still merge
across a join: its samples are exact in length but their text may not re-tokenise (the lm-eval export and the
text-only server path check it and refuse).

Typical use (what every task module does)::

    pieces = Pieces(encode, decode)                          # caches the encoding of repeated strings
    needles = [pieces.ids(needle_text)]
    question = pieces.ids(question_text)
    fill = length - sum(map(len, needles)) - len(question)  # tokens left for the haystack
    stream, bounds = haystack.stream(rng, fill, pieces)      # exactly ``fill`` tokens
    context, starts = insert_needles(stream, bounds, needles, [depth])
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from ropekit.errors import InvalidArgument

#: RULER's noise haystack (the sentence it repeats; ``type_haystack: noise``)
NOISE = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
#: haystack kinds: RULER's repeated noise sentences, the evaluation text (``--text``), or other needles
HAYSTACKS = ("noise", "text", "needles")
CONSONANTS = "bdfghklmnprstvz"
VOWELS = "aeiou"

Encode = Callable[[bytes], np.ndarray]
Decode = Callable[[list[int]], str]
T = TypeVar("T")


@dataclass(frozen=True)
class Question:
    """One question about a sample's context.

    Attributes:
        ids: the question and its answer prefix, token ids appended to the context.
        answers: the reference strings; scoring looks for each in the model's output (RULER's string match).
        target: token ids of the canonical answer (all references, in the order the text gives them); used to train,
            and by the teacher-forced shortcut (greedy output that starts with it contains every reference).
        budget: the most tokens greedy decoding may produce (at least ``len(target)``).
        metric: ``"all"`` (RULER's ``string_match_all``), ``"part"`` (``string_match_part``) or ``"prefix"`` (a
            long answer, ``answers`` its lines: the fraction right in order before the first wrong one).
        twin: ``""`` for the task's own question, else its twin's label (``"literal"``), scored apart.
    """

    ids: np.ndarray
    answers: tuple[str, ...]
    target: np.ndarray
    budget: int
    metric: str = "all"
    twin: str = ""


@dataclass(frozen=True)
class Sample:
    """One generated sample: a context and the questions asked about it (each after the same context).

    Attributes:
        task: the task's name.
        context: ``(n,)`` int64 token ids (haystack with needles).
        questions: asked one after the other, each directly after ``context`` (a shared prefill).
        depth: where the asked needle was placed (fraction of the haystack; ``nan`` where no needle).
        needle_starts: token index in ``context`` where each needle starts (the asked one first).
    """

    task: str
    context: np.ndarray
    questions: tuple[Question, ...]
    depth: float = float("nan")
    needle_starts: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        """The sample's length: the context, then its longest question with that question's canonical answer (a right
        answer is decoded inside the length; :func:`answer_room`)."""
        return len(self.context) + max(answer_room(q) for q in self.questions)

    def prompt(self, index: int = 0) -> np.ndarray:
        """Context followed by question ``index``."""
        return np.concatenate([self.context, self.questions[index].ids])

    def sequence(self, index: int = 0) -> np.ndarray:
        """Context, question ``index`` and its canonical answer: a training sequence."""
        return np.concatenate([self.context, self.questions[index].ids, self.questions[index].target])


@dataclass
class Pieces:
    """Encodes strings with the model's tokenizer, caching repeated ones (the noise sentence, templates).

    Attributes:
        encode: text (UTF-8 bytes) → token ids, no special tokens added.
        decode: token ids → text (the model's ``detokenize``); it tells where a text haystack may be cut
            (:meth:`cuts`), whether the tokenizer puts a space in front of what it encodes (:meth:`adds_space`) and
            whether a piece reads back (:meth:`reads_back`). Without it a text haystack is cut at any token, and its
            samples may not re-tokenise.
        space: whether the tokenizer puts a space in front of every text it encodes (``None``: ask
            :meth:`adds_space`).
    """

    encode: Encode
    decode: Decode | None = None
    cache: dict[str, np.ndarray] = field(default_factory=dict)
    #: per token id: (its text starts with a space, its text ends in a whole non-space character)
    edges: dict[int, tuple[bool, bool]] = field(default_factory=dict)
    space: bool | None = None

    def ids(self, text: str) -> np.ndarray:
        if text not in self.cache:
            self.cache[text] = self.once(text)
        return self.cache[text]

    def once(self, text: str) -> np.ndarray:
        """``text`` encoded without caching it (a string no other sample will hold: the cache would only grow). A
        tokenizer that puts a space in front of what it encodes (SentencePiece's dummy prefix) is given the text
        without its own leading space, so that the piece's ids are those of the text after a non-space character."""
        if text.startswith(" ") and self.adds_space():
            text = text[1:]
        return np.asarray(self.encode(text.encode()), dtype=np.int64)

    def adds_space(self) -> bool:
        """Whether the tokenizer puts a space in front of every text it encodes (Llama 2's and Mistral's
        SentencePiece: ``"x"`` and ``"x"`` encoded one by one decode together as ``"x x"``)."""
        if self.space is None:
            if self.decode is None:
                self.space = False
            else:
                x = np.asarray(self.encode(b"x"), dtype=np.int64).tolist()
                self.space = self.decode(x + x) == "x x"
        return self.space

    def reads_back(self, ids: np.ndarray) -> bool:
        """Whether ``ids`` may end a stream that a piece follows: decoded and encoded again as a piece
        (:meth:`once`) they are the same ids, and their last token ends in a whole non-space character (always
        true without :attr:`decode`: nothing can tell)."""
        if self.decode is None or not len(ids):
            return True
        last = self.token_text(int(ids[-1]))
        if not last or last[-1].isspace() or last[-1] == "\ufffd":
            return False
        return self.once(self.decode([int(i) for i in ids])).tolist() == [int(i) for i in ids]

    def token_text(self, token: int) -> str:
        """The text ``token`` adds after a word: a tokenizer whose decoding drops a leading space at the start of a
        text (SentencePiece's) keeps it after one."""
        anchor = np.asarray(self.encode(b"x"), dtype=np.int64).tolist()
        head, both = self.decode(anchor), self.decode([*anchor, token])
        return both[len(head) :] if both.startswith(head) else self.decode([token])

    def cuts(self, ids: np.ndarray) -> np.ndarray | None:
        """Where ``ids`` (a text tokenized whole) may be cut and joined with a piece: ``(len(ids) + 1,)`` bools,
        entry ``i`` for the cut before token ``i``. A cut is clean where token ``i`` starts with a space and token
        ``i - 1`` ends in a whole non-space character (the text's start and end count as such): every tokenizer
        family splits text there on its own (:mod:`~ropekit.synthetic.base`), so either side tokenizes alone as it
        did in the whole, and joins a piece that ends in a non-space character or starts with a space the same way.
        ``None`` without :attr:`decode`.
        """
        if self.decode is None:
            return None
        unique, inverse = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
        for token in unique.tolist():
            if token not in self.edges:
                text = self.token_text(token)
                whole_end = bool(text) and not text[-1].isspace() and text[-1] != "\ufffd"  # not a partial character
                self.edges[token] = (text[:1] == " ", whole_end)
        table = np.array([self.edges[t] for t in unique.tolist()], dtype=bool).reshape(-1, 2)[inverse]
        starts = np.concatenate([table[:, 0], [True]])
        ends = np.concatenate([[True], table[:, 1]])
        return starts & ends


def random_word(rng: np.random.Generator, syllables: int = 3) -> str:
    """A pronounceable pseudo-word (consonant-vowel syllables): never an English word the haystack could hold."""
    return "".join(
        CONSONANTS[rng.integers(len(CONSONANTS))] + VOWELS[rng.integers(len(VOWELS))] for _ in range(syllables)
    )


#: draws in a row that may all repeat a value already taken before a generator gives up: the suite's generators take
#: a few values out of thousands or more, so reaching this means parameters that ask for nearly every value there is
MAX_REPEATS = 64


def draw_new(draw: Callable[[], T], taken: Callable[[T], bool], what: str) -> T:
    """The first of ``draw()``'s values that is not ``taken``, drawn as ``while taken(v): v = draw()`` draws it.

    Raises:
        ValueError: :data:`MAX_REPEATS` draws in a row were all taken (the message starts with ``what``).
    """
    for _ in range(MAX_REPEATS):
        value = draw()
        if not taken(value):
            return value
    raise ValueError(f"{what}: {MAX_REPEATS} draws in a row repeated values already taken")


def random_number(rng: np.random.Generator, digits: int = 7) -> str:
    """A ``digits``-digit decimal number without a leading zero (RULER's needle values are 7 digits)."""
    return str(int(rng.integers(10 ** (digits - 1), 10**digits)))


def random_uuid(rng: np.random.Generator) -> str:
    """A version-4 UUID from ``rng`` (deterministic, unlike :func:`uuid.uuid4`)."""
    import uuid

    raw = bytearray(rng.integers(0, 256, 16, dtype=np.uint8).tobytes())
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


@dataclass(frozen=True)
class Haystack:
    """Where filler comes from.

    Attributes:
        kind: ``"noise"`` (:data:`NOISE` repeated), ``"text"`` (a random contiguous slice of ``text``) or
            ``"needles"`` (distractor needles drawn by ``distractor``).
        text: token ids of the evaluation text (``kind="text"``).
        distractor: ``rng → text`` of one distractor needle (``kind="needles"``).
    """

    kind: str
    text: np.ndarray | None = None
    distractor: Callable[[np.random.Generator], str] | None = None

    def stream(self, rng: np.random.Generator, count: int, pieces: Pieces) -> tuple[np.ndarray, Sequence[int]]:
        """Exactly ``count`` filler tokens, and the indices where a whole unit (sentence, needle) starts (in a text
        haystack: its clean cuts, :meth:`Pieces.cuts`), its end among them.

        Raises:
            InvalidArgument: ``text`` has no more than ``count`` tokens (a ``ValueError`` about ``text``).
        """
        if count <= 0:
            return np.zeros(0, dtype=np.int64), [0]
        if self.kind == "text":
            return self._slice(rng, count, pieces)
        units, total, bounds = [], 0, [0]
        while total < count:  # each unit adds at least one token
            unit = self._unit(rng, pieces)
            units.append(unit)
            total += len(unit)
            bounds.append(min(total, count))
        kept = count - (total - len(units[-1]))  # tokens of the last unit in the stream
        if kept < len(units[-1]) and not pieces.reads_back(units[-1][:kept]):
            return self._clean_end(rng, count, pieces, units, bounds)
        return np.concatenate(units)[:count], bounds

    def _unit(self, rng: np.random.Generator, pieces: Pieces) -> np.ndarray:
        unit = pieces.ids(NOISE) if self.kind == "noise" else pieces.once(self.distractor(rng))
        if not len(unit):
            raise ValueError(f"the tokenizer encodes a {self.kind} haystack unit to no tokens")
        return unit

    def _clean_end(
        self, rng: np.random.Generator, count: int, pieces: Pieces, units: list[np.ndarray], bounds: list[int]
    ) -> tuple[np.ndarray, Sequence[int]]:
        """The stream of :meth:`stream` where its last unit, cut short, would not read back (the tokenizer would
        tokenize the cut word otherwise, read whole): distractor needles draw another last unit until its cut reads
        back; the noise starts and ends at clean cuts of its sentence (:meth:`Pieces.cuts`) that add up to
        ``count``. Where neither is found, the cut stream as it was."""
        start = bounds[-2]  # where the last unit starts
        if self.kind != "noise":
            for _ in range(MAX_REPEATS):
                unit = self._unit(rng, pieces)
                if len(unit) >= count - start and pieces.reads_back(unit[: count - start]):
                    return np.concatenate([*units[:-1], unit])[:count], bounds
            return np.concatenate(units)[:count], bounds
        noise = pieces.ids(NOISE)
        size, cuts = len(noise), np.flatnonzero(pieces.cuts(noise)).tolist()
        for first in cuts:  # the stream: noise[first:], whole sentences, noise[:last]
            for last in cuts:
                middle = count - (size - first) - last
                if first < last and last - first == count and count < size:
                    return noise[first:last].copy(), [0, count]
                if middle >= 0 and middle % size == 0:
                    whole = middle // size
                    parts = [noise[first:], *[noise] * whole, noise[:last]]
                    ends = np.cumsum([0, *(len(p) for p in parts)]).tolist()
                    return np.concatenate(parts), sorted(set(ends))
        return np.concatenate(units)[:count], bounds

    def _slice(self, rng: np.random.Generator, count: int, pieces: Pieces) -> tuple[np.ndarray, Sequence[int]]:
        """A random slice of ``count`` tokens of ``text`` that starts and ends at clean cuts (:meth:`Pieces.cuts`),
        and its clean cuts as the needles' bounds; where the text has no such slice (no decode, or a tokenizer whose
        tokens never decode with their leading space), a random slice cut anywhere."""
        size = len(self.text)
        if size <= count:
            message = f"the haystack text has {size:,} tokens; this sample needs more than {count:,}"
            raise InvalidArgument("text", size, allowed=f"more than {count:,} tokens", message=message)
        cuts = pieces.cuts(self.text)
        valid = None if cuts is None else np.flatnonzero(cuts[: size - count] & cuts[count:size])
        if valid is None or not len(valid):
            start = int(rng.integers(0, size - count))
            return np.asarray(self.text[start : start + count], dtype=np.int64), range(count + 1)
        start = int(valid[rng.integers(len(valid))])
        bounds = np.flatnonzero(cuts[start : start + count + 1]).tolist()  # 0 and count among them
        return np.asarray(self.text[start : start + count], dtype=np.int64), bounds


def insert_needles(
    stream: np.ndarray, bounds: Sequence[int], needles: Sequence[np.ndarray], depths: Sequence[float]
) -> tuple[np.ndarray, tuple[int, ...]]:
    """Put each needle at its depth (0 = start of the haystack, 1 = its end), at the unit boundary at or before it.

    Returns:
        The context, and each needle's first token index in it (in the order the needles were given).
    """
    cuts = []
    for depth in depths:
        target = round(depth * len(stream))
        cuts.append(bounds[bisect.bisect_right(bounds, target) - 1])  # the last bound at or before it (sorted)
    order = sorted(range(len(needles)), key=lambda i: (cuts[i], i))
    parts, starts, previous, offset = [], [0] * len(needles), 0, 0
    for i in order:
        parts.append(stream[previous : cuts[i]])
        offset += cuts[i] - previous
        starts[i] = offset
        parts.append(needles[i])
        offset += len(needles[i])
        previous = cuts[i]
    parts.append(stream[previous:])
    return np.concatenate(parts).astype(np.int64), tuple(starts)


def largest_fitting(size: Callable[[int], int], budget: int, lowest: int = 1) -> int:
    """The largest ``n >= lowest`` with ``size(n) <= budget`` (``size`` non-decreasing, ``size(n) >= n``: every item
    takes a token), by doubling then bisection; ``lowest - 1`` when even ``lowest`` does not fit. RULER fits its
    haystacks the same way.

    Raises:
        ValueError: ``size`` stays within ``budget`` beyond ``n = budget`` (it does not grow).
    """
    if size(lowest) > budget:
        return lowest - 1
    low, high = lowest, max(1, 2 * lowest)
    while size(high) <= budget:  # size(low) fits; find a high that does not
        if high > budget:  # every item takes a token, so size(n) >= n: only a size that does not grow gets here
            raise ValueError(f"size({high}) = {size(high)} stays within {budget}: it does not grow with n")
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if size(middle) <= budget:
            low = middle
        else:
            high = middle
    return low


def too_short(task: str, length: int, fixed: int) -> ValueError:
    """The error for a length that cannot hold a task's needles, question and answer."""
    return ValueError(f"task {task!r} needs a length of at least {fixed + 1} tokens with this tokenizer, got {length}")


#: tokens greedy decoding may produce beyond the canonical answer (a model may add spaces)
ANSWER_SLACK = 8


def budget_for(target: np.ndarray, slack: int = ANSWER_SLACK) -> int:
    """Tokens greedy decoding may produce: the canonical answer's and a few more (a model may add spaces)."""
    return len(target) + slack


def answer_room(question: Question) -> int:
    """Tokens ``question`` takes after the context inside a sample's length: its own ids and its canonical answer.

    The answer fits the length, as in a training sequence and as in RULER (whose generators count the answer in the
    input's total): a right answer is decoded at positions inside the length, so at 1x no answer token sits at a
    position the model never saw in training. Only a wrong or padded answer runs on past the length, by at most the
    budget's slack (:data:`ANSWER_SLACK` tokens).
    """
    return len(question.ids) + len(question.target)
