"""Auditing an assistant we did not write, from its OpenInference or OTel GenAI spans (docs/design.md §12).

The rooms, in the order data flows through them:
- `spans`: OTLP requests (protobuf or JSON, parsed by `opentelemetry-proto`) into typed `Span` records, bounded;
- `phoenix`: the spans of an Arize Phoenix project (read with `arize-phoenix-client`) into the same records;
- `shapes`: every shape a model call's messages are written in, read into one internal shape (`Message`);
- `text_results`: a plain-text tool result split into the documents it names;
- `units`: what retrievers, rerankers and tools returned (units), and the document each belongs to;
- `turns`: which traces are turns, their model calls, input messages, question and answer;
- `calls`: the turn's tool calls, one per requested call, and the units each returned;
- `sessions`: whose conversation a turn is: the audited service's session, never one of the workbench's own;
- `measure`: exposure measured from what reached a model input, `not_shown`, numbered blocks;
- `audited`: the turn record and payload (the three sets by `provenance`, plus the `audit` object);
- `collector`: the store side: raw spans and assembled turns through the trace writer, the OTLP/HTTP receiver;
- `ingest`: spans read all at once (a file, a Phoenix project) stored and assembled, oldest trace first.

Nothing here runs or imports the agent: an audited turn is what another app did, read from its spans.
"""
