"""What the notebooks call: tables (pandas) and charts (plotly) over payloads and the trace store.

The notebooks hold parameters, prose and calls to these functions, nothing else, so every number
they show is computed by tested code. This package sits at the notebook layer: right of the trace
store, the session and the `eval` command, whose batch loop it reuses rather than copies. It never
opens DuckDB itself; every query goes through the trace store's read-only reader. One module per
subject; everything is re-exported here, so a notebook needs only `from workbench import analysis as A`:

- `inputs`: a notebook's trace database, question set, configured providers, display set-up;
- `sets`: one turn's three sets, tool calls, sources array and rejected citations;
- `runs`: batches across configurations, set sizes, verdicts of verification by ablation;
- `faithfulness`: a judged run, and the judges against ExpertQA's expert labels;
- `experiments`: runs scored against their questions' expectations (`workbench.trace.scoring`): the
  leaderboard with 95 % intervals, the per-question diff and rows, error-bar charts;
- `conversations`: conversations in the trace store, how often follow-ups cite carried documents, and which;
- `usage`: document usage over runs (retrieved, cited, consulted turns per document and category);
- `charts`: the plotly figures of all of the above.
"""

from .charts import (calibration_figure, measure_figure, over_time_figure, set_sizes_figure, time_axis,
                     usage_figure)
from .carried_citations import (carried_citation_rate, carried_documents, conversation_table,
                            seed_demo_conversations)
from .experiments import (compare_runs, diff_table, flips_table, leaderboard_figure, leaderboard_table,
                          paired_table, question_table, rows_figure, rows_table, shared_text)
from .faithfulness import (ask_and_judge, auroc, balanced_accuracy, calibration, expertqa_path, expertqa_status,
                           judge_scores, judge_summary, load_expertqa)
from .inputs import (QuestionSet, analysis_db, configured_providers, load_questions, notebook_db, question_set,
                     require_traces, setup_notebook, export_dir)
from .runs import run_question_set, seed_demo_traces, set_sizes, verdict_counts
from .sets import (ROW_LABELS, SET_COLORS, SETS, rejected_table, sources_table, style_three_sets, three_sets,
                   tool_calls_table)
from .usage import corpus_of, document_usage, never_retrieved, retrieved_not_consulted, usage_totals

__all__ = [
    "ROW_LABELS", "SETS", "SET_COLORS", "QuestionSet", "ask_and_judge", "auroc", "balanced_accuracy", "calibration",
    "calibration_figure", "carried_citation_rate", "carried_documents", "compare_runs", "conversation_table",
    "configured_providers", "diff_table", "flips_table", "leaderboard_figure", "paired_table", "shared_text",
    "leaderboard_table", "question_table", "rows_figure", "rows_table", "corpus_of", "document_usage",
    "expertqa_path", "expertqa_status", "judge_scores", "judge_summary", "load_expertqa",
    "load_questions", "measure_figure", "never_retrieved", "notebook_db", "analysis_db", "require_traces",
    "over_time_figure", "question_set",
    "rejected_table",
    "retrieved_not_consulted", "run_question_set", "seed_demo_conversations", "seed_demo_traces", "set_sizes",
    "set_sizes_figure",
    "setup_notebook", "export_dir", "sources_table", "style_three_sets", "three_sets", "time_axis", "tool_calls_table", "usage_figure",
    "usage_totals", "verdict_counts",
]
