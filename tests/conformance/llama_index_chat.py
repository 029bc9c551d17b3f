"""A llama-index chat engine over the help center with a postprocessor (`SimilarityPostprocessor` drops the weakest
hit before the prompt), the conversation kept by the engine; instrumented by OpenInference's `LlamaIndexInstrumentor`."""

import kit
from llama_index.core.chat_engine import CondensePlusContextChatEngine
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

CUTOFF = 0.5


class HelpCenter(BaseRetriever):
    """The help center's search as a llama-index retriever: four hits, the last scored below the cutoff."""

    def _retrieve(self, query_bundle):
        hits = kit.search(query_bundle.query_str, 4)
        scores = [0.9, 0.8, 0.7, 0.2]
        kit.record("drop", dropped=[h["doc_id"] for h, s in zip(hits, scores) if s < CUTOFF])
        return [NodeWithScore(node=TextNode(text=h["snippet"], id_=f"{h['doc_id']}#0",
                                            metadata={"title": h["title"], "url": h["url"]}), score=s)
                for h, s in zip(hits, scores)]


def new_chat():
    llm = OpenAI(model="gpt-4o-mini", api_base=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    engine = CondensePlusContextChatEngine.from_defaults(
        HelpCenter(), llm=llm, system_prompt=kit.SYSTEM, skip_condense=True,
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=CUTOFF)])
    return lambda question: str(engine.chat(question))


def instrument(provider):
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-llama-index-chat", instrument, new_chat)
