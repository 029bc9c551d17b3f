"""The google-genai client with function calling (functionCall / functionResponse), instrumented by OpenInference's
`GoogleGenAIInstrumentor`."""

import kit
from google import genai
from google.genai import types
from openinference.instrumentation.google_genai import GoogleGenAIInstrumentor

TOOLS = [types.Tool(function_declarations=[
    types.FunctionDeclaration(name="search_help_center", description="Search the help center.",
                              parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    types.FunctionDeclaration(name="open_article", description="Open an article in full.",
                              parameters={"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]})])]


def run_tool(name: str, args: dict) -> dict:
    if name == "search_help_center":
        return {"results": kit.search(args["query"])}
    return {"article": kit.open_article(args["doc_id"])}


def new_chat():
    client = genai.Client(api_key="AIza-test", http_options=types.HttpOptions(base_url=kit.MODEL_URL))
    config = types.GenerateContentConfig(system_instruction=kit.SYSTEM, tools=TOOLS,
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    contents: list = []

    def ask(question: str) -> str:
        contents.append(types.Content(role="user", parts=[types.Part(text=question)]))
        while True:
            reply = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
            content = reply.candidates[0].content
            contents.append(content)
            calls = [p.function_call for p in content.parts if p.function_call]
            if not calls:
                return reply.text
            contents.append(types.Content(role="user", parts=[
                types.Part.from_function_response(name=c.name, response=run_tool(c.name, dict(c.args))) for c in calls]))
    return ask


def instrument(provider):
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-google-genai", instrument, new_chat)
