"""A llama-index query engine (`RetrieverQueryEngine`) with a postprocessor (`SimilarityPostprocessor` drops the
weakest hit before the prompt); each question is its own query (no history), the session groups them;
instrumented by OpenInference's `LlamaIndexInstrumentor`."""

import kit
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.llms.openai import OpenAI
from llama_index_chat import CUTOFF, HelpCenter, instrument


def new_chat():
    llm = OpenAI(model="gpt-4o-mini", api_base=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    engine = RetrieverQueryEngine.from_args(HelpCenter(), llm=llm,
                                            node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=CUTOFF)])
    return lambda question: str(engine.query(question))


if __name__ == "__main__":
    kit.main("conformance-llama-index-query", instrument, new_chat)
