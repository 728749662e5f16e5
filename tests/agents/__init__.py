"""Three small agents the rest of the project never saw, for checking that otelcar's rebuilt
agent is the user's agent (issue 35; ``tests/test_counterfactual_agents.py``).

Each agent uses the plain ``openai`` client and nothing of otelcar: a fixed **workflow** with a
tool-less final step (:mod:`.cleanup`), a tool **loop** (:mod:`.refund_loop`) and a **handoff**
between two agents (:mod:`.handoff`). :mod:`.model` is the scripted model they talk to (an
OpenAI-compatible server on 127.0.0.1 whose answers come from each agent's ``brain``, a
seeded function of the request, so the same brain also serves as otelcar's re-decision
policy), and :mod:`.run` runs one agent once, traced by a real instrumentation
(``opentelemetry-instrumentation-openai-v2``, which records no tool definitions, or
``openinference-instrumentation-openai``, which records them), exported by the official
OTLP/JSON file exporter.
"""
