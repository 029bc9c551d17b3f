# examples/plugins/my_provider.py
import json

from workbench.providers import ModelStep, Provider, ToolRequest, register_provider
from workbench.types import ModelCall


class OpenFirstHit(Provider):
    """Searches, opens the best hit and links it: no model, but the same loop and provenance."""

    name = "openfirst"
    label = "open-first-hit (example)"

    def complete(self, messages, tools):
        call = ModelCall(self.name, self.model or "v1")        # latency, tokens… if you have them
        if not tools:                                          # excerpt mode
            return ModelStep("See [1].", (), call)
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            question = next(m["content"] for m in messages if m["role"] == "user")
            return ModelStep("", (ToolRequest("c1", "search", {"query": question}),), call)
        if len(results) == 1:
            top = json.loads(results[0]["content"])["results"][0]
            return ModelStep("", (ToolRequest("c2", "fetch_document", {"doc_id": top["doc_id"]}),), call)
        doc = json.loads(results[1]["content"])
        return ModelStep(f"Read [{doc['title']}]({doc['url']}).", (), call)


register_provider("openfirst", OpenFirstHit)
