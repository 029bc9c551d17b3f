"""A LangChain LCEL RAG chain with a rerank step: a retriever returns four articles, a reranker keeps three, the
prompt shows them (title, URL, snippet) with the conversation so far; instrumented by `LangChainInstrumentor`."""

import kit
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_openai import ChatOpenAI
from openinference.instrumentation.langchain import LangChainInstrumentor


class HelpCenter(BaseRetriever):
    """The help center's search as a LangChain retriever."""

    k: int = 4

    def _get_relevant_documents(self, query, *, run_manager=None):
        return [Document(page_content=h["snippet"], metadata={"url": h["url"], "title": h["title"], "doc_id": h["doc_id"]})
                for h in kit.search(query, self.k)]


def rerank(docs: list[Document]) -> list[Document]:
    """Keep the three best (the last is dropped before the prompt)."""
    kit.record("drop", dropped=[d.metadata["doc_id"] for d in docs[3:]])
    return docs[:3]


def context(docs: list[Document]) -> str:
    return "\n\n".join(f"Title: {d.metadata['title']}\nURL: {d.metadata['url']}\n{d.page_content}" for d in docs)


PROMPT = ChatPromptTemplate.from_messages([("system", kit.SYSTEM), MessagesPlaceholder("history"),
                                           ("human", "Articles:\n{context}\n\nQuestion: {question}")])


def new_chat():
    model = ChatOpenAI(model="gpt-4o-mini", base_url=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    chain = ({"context": (lambda x: x["question"]) | HelpCenter() | RunnableLambda(rerank).with_config(run_name="rerank")
              | context, "question": lambda x: x["question"], "history": lambda x: x["history"]}
             | PROMPT | model | StrOutputParser())
    history = []

    def ask(question: str) -> str:
        answer = RunnablePassthrough().pipe(chain).invoke({"question": question, "history": list(history)})
        history.extend([HumanMessage(question), AIMessage(answer)])
        return answer
    return ask


def instrument(provider):
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-langchain-lcel", instrument, new_chat)
