"""A life's timeline labels its stages with their workload variant as text: plotly reads HTML in an annotation (an
`<a href>` there is a link), and a variant's label comes from a run folder, which may be anyone's."""
import pandas as pd

from lookahead_runner.report.timelines import timeline_figure

LINK = '<a href="https://evil.example/">4,000-token prompts</a>'


def test_a_variant_label_with_markup_is_drawn_as_written():
    parts = {"server": pd.DataFrame({"t_s": [100.0, 101.0, 102.0], "running": [1.0, 2.0, 2.0]}),
             "stages": pd.DataFrame({"t_start_s": [100.0], "t_end_s": [102.0], "users": [4], "variant": [LINK]})}
    (label,) = timeline_figure(parts)["layout"]["annotations"]
    assert "<a" not in label["text"] and "</a>" not in label["text"]
    assert label["text"] == "4 users · &lt;a href=\"https://evil.example/\"&gt;4,000-token prompts&lt;/a&gt;"
