"""What a client shows of a turn, one job per module:

- `sources`: the three sets and their colours, the sources row (chips), the verdicts of verification,
  the summary line and the `/sources` listing, as plain text;
- `escaping`: untrusted text made safe to show (literal markdown, model markdown without links, plain
  text for widgets and charts, safe URLs);
- `answer_links`: the answer with its citations as links and badges;
- `highlight`: what of a document the model saw or quoted, as spans, and the text with them highlighted;
- `document`: a document's own markdown, formatted but inert (the side panel);
- `timeline`: a turn's model and tool calls on one time axis.
"""
