"""BeamTree: the whole story of one beam search, as plain data (numpy + Python).

Every candidate each beam proposed is a node: the ones that stayed in the beam ("kept"),
the ones considered but cut ("pruned"), the ones that ended with EOS or at max_len
("finished"). Node 0 is the root (the start token, or the forced prefix / prompt).
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..model.choices import Attention

NODE_STATUSES = ("root", "kept", "pruned", "finished")


@dataclass
class BeamNode:
    id: int
    parent: int | None  # None for the root
    step: int  # 0 for the root, 1 for the first generated token, ...
    token: str
    token_id: int
    logprob: float  # log P(token | prefix), this step only
    cum_logprob: float  # parent's cum_logprob + logprob
    score: float  # length-normalised: cum_logprob / length ** length_penalty
    status: str  # one of NODE_STATUSES
    # For kept/finished nodes: attention of the step that chose this token over the
    # source (cross) or prefix (self), float32 [layer, head, key]; None otherwise.
    attention: np.ndarray | None = None


@dataclass
class Hypothesis:
    tokens: list[str]  # generated tokens, without special tokens or the prompt
    token_ids: list[int]
    text: str
    score: float  # equals Hugging Face's sequences_scores for the same search
    node_id: int  # the last node of this path in the tree


@dataclass
class BeamTree:
    nodes: list[BeamNode]
    hypotheses: list[Hypothesis]  # n-best, best first
    settings: dict[str, Any] = field(default_factory=dict)
    source_tokens: list[str] = field(default_factory=list)
    attention_keys: list[str] = field(default_factory=list)  # labels of attention's key axis
    attention_kind: Attention = "cross"  # "self": a decoder-only model's

    def node(self, node_id: int) -> BeamNode:
        return self.nodes[node_id]

    def path(self, node_id: int) -> list[BeamNode]:
        """Nodes from the root's first child down to node_id."""
        out = []
        cur: int | None = node_id
        while cur is not None and self.nodes[cur].parent is not None:
            out.append(self.nodes[cur])
            cur = self.nodes[cur].parent
        return out[::-1]

    def children(self, node_id: int) -> list[BeamNode]:
        return [n for n in self.nodes if n.parent == node_id]

    # --- JSON, lossless: floats keep full precision, arrays travel as base64 float32 ---
    def to_json(self) -> str:
        def enc_node(n: BeamNode) -> dict:
            d = asdict(n)
            if n.attention is not None:
                a = np.ascontiguousarray(n.attention, dtype=np.float32)
                d["attention"] = {
                    "shape": list(a.shape),
                    "b64": base64.b64encode(a.tobytes()).decode("ascii"),
                }
            return d

        payload = {
            "nodes": [enc_node(n) for n in self.nodes],
            "hypotheses": [asdict(h) for h in self.hypotheses],
            "settings": self.settings,
            "source_tokens": self.source_tokens,
            "attention_keys": self.attention_keys,
            "attention_kind": self.attention_kind,
        }
        return json.dumps(payload)

    @classmethod
    def from_json(cls, text: str) -> BeamTree:
        payload = json.loads(text)
        nodes = []
        for d in payload["nodes"]:
            att = d.pop("attention")
            if att is not None:
                raw = base64.b64decode(att["b64"])
                att = np.frombuffer(raw, dtype=np.float32).reshape(att["shape"]).copy()
            nodes.append(BeamNode(**d, attention=att))
        return cls(
            nodes=nodes,
            hypotheses=[Hypothesis(**h) for h in payload["hypotheses"]],
            settings=payload["settings"],
            source_tokens=payload["source_tokens"],
            attention_keys=payload["attention_keys"],
            attention_kind=payload["attention_kind"],
        )
