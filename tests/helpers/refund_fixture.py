"""What the committed refund fixtures hold (fixtures/otlp, and the same conversation in the
LangSmith, Langfuse, OpenInference and OpenLLMetry fixtures): its messages, calls and the
context of each decision."""

from __future__ import annotations

SYSTEM = (
    "You are a refund support agent. Use the tools to look up orders and the refund "
    "policy before answering."
)
USER = "I want a refund for order A-1001, it arrived broken."
ORDER = (
    '{"order_id": "A-1001", "customer": "Dana Reyes", "amount": 129.99, '
    '"status": "delivered", "category": "electronics"}'
)
POLICY = "Electronics may be refunded within 30 days of delivery if damaged."
REFUND = "Refund R-77 issued for 129.99"
FINAL = "I have issued refund R-77 of $129.99 for order A-1001."
CALLS_1 = [
    ("call_lookup_1", "lookup_order", {"order_id": "A-1001"}),
    ("call_policy_1", "get_refund_policy", {"category": "electronics"}),
]
CALLS_2 = [("call_refund_1", "issue_refund", {"order_id": "A-1001", "amount": 129.99})]
TOOLS = [
    ("lookup_order", "call_lookup_1", {"order_id": "A-1001"}, ORDER),
    ("get_refund_policy", "call_policy_1", {"category": "electronics"}, POLICY),
    ("issue_refund", "call_refund_1", {"order_id": "A-1001", "amount": 129.99}, REFUND),
]


EXPECTED_CONTEXTS = [
    [("system", SYSTEM, [], None), ("user", USER, [], None)],
    [
        ("system", SYSTEM, [], None),
        ("user", USER, [], None),
        ("assistant", None, CALLS_1, None),
        ("tool", ORDER, [], "call_lookup_1"),
        ("tool", POLICY, [], "call_policy_1"),
    ],
    [
        ("system", SYSTEM, [], None),
        ("user", USER, [], None),
        ("assistant", None, CALLS_1, None),
        ("tool", ORDER, [], "call_lookup_1"),
        ("tool", POLICY, [], "call_policy_1"),
        ("assistant", None, CALLS_2, None),
        ("tool", REFUND, [], "call_refund_1"),
    ],
]
