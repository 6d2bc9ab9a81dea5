"""HTML cards of a step's groups: content, colours, badges, escaping, and no overflow at 1280 px."""

import re

import pytest

from workbench.insight import groups
from workbench.ui.completions_view import render_empty_html, render_groups_html

HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'
LONG_WORD = "y" * 600


def make_records(
    step=3,
    totals=((0.9, 0.1, 0.5, 0.5), (0.4, 0.4, 0.4, 0.4)),
    truncated=(1,),
    completions=None,
    prompt="Name a colour.",
):
    """completions.jsonl records of one round with TRL-style (group-scaled) advantages."""
    records = []
    for group, values in enumerate(totals):
        mean, std = groups.mean_and_std(values)
        for index, total in enumerate(values):
            text = (completions or {}).get((group, index), f"Colour {index}")
            records.append(
                {
                    "step": step,
                    "group": group,
                    "prompt": prompt,
                    "completion": text,
                    "rewards": {"brevity": total, "format": 0.0},
                    "reward": total,
                    "advantage": (total - mean) / (std + 1e-4),
                    "length": 12,
                    "truncated": index in truncated,
                }
            )
    return records


def render(records, step=3):
    return render_groups_html(groups.groups_for_step(records, step))


def test_one_section_per_prompt_and_one_card_per_completion():
    html = render(make_records())
    assert html.count('class="wb-group"') == 2
    assert html.count('class="wb-card ') == 8
    assert "Prompt 1 of 2" in html and "Prompt 2 of 2" in html
    assert "group mean 0.50 · std 0.33 · 4 of 4 completions" in html


def test_card_shows_scores_total_advantage_and_arithmetic():
    html = render(make_records())
    first_card = html.split('class="wb-card ')[1]
    assert "<td>brevity</td><td>0.90</td>" in first_card and "<td>format</td><td>0.00</td>" in first_card
    assert '<tr class="wb-total"><td>total</td><td>0.90</td></tr>' in first_card
    assert '<span class="wb-advantage wb-positive">+1.22</span>' in first_card
    assert "(0.900 - 0.500) / 0.327 = +1.22" in first_card  # 0.40 / 0.33 would be 1.21


@pytest.mark.parametrize(
    "index, css", [(0, "wb-positive"), (1, "wb-negative"), (2, "wb-zero")], ids=["above-mean", "below-mean", "at-mean"]
)
def test_advantage_colour_follows_its_sign(index, css):
    cards = render(make_records()).split('class="wb-card ')[1:]
    assert cards[index].startswith(css)


def test_badges_mark_truncated_and_zero_advantage():
    cards = render(make_records()).split('class="wb-card ')[1:]
    assert ">truncated<" in cards[1] and ">truncated<" not in cards[0]
    assert ">zero advantage<" in cards[2] and ">zero advantage<" not in cards[0]
    # A group with equal rewards: every card zero, and the note says why.
    html = render(make_records())
    assert sum(">zero advantage<" in card for card in cards[4:]) == 4
    assert "teaches the model nothing" in html


def test_model_text_is_escaped():
    records = make_records(completions={(0, 0): HOSTILE}, prompt=HOSTILE)
    records[0]["rewards"] = {"<b>bold</b>": 1.0}
    html = render(records)
    assert "<script>" not in html.replace("<style>", "") and "<img" not in html and "<b>bold" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img" in html


def test_empty_completion_and_empty_step_have_words():
    html = render(make_records(completions={(0, 0): "  "}))
    assert "(empty completion)" in html
    assert "No completions yet" in render_groups_html([])
    assert "waiting" in render_empty_html("waiting")


def test_half_group_says_how_many_are_in():
    html = render(make_records()[:6])
    assert "2 of 4 completions" in html and "recorded so far" in html


def test_css_is_self_contained_and_prefixed():
    html = render(make_records())
    classes = set(re.findall(r'class="([^"]+)"', html))
    assert all(name.startswith("wb-") for value in classes for name in value.split())
    style = html[html.index("<style>") : html.index("</style>")]
    selectors = re.findall(r"^\s*([^{}\n]+)\{", style, flags=re.M)
    assert selectors and all(".wb-" in selector for selector in selectors)


@pytest.mark.browser
def test_nothing_overflows_at_1280_px(page):
    records = make_records(
        totals=((0.9, 0.1, 0.5, 0.5, 0.2, 0.3, 0.8, 0.7),),
        completions={(0, 0): LONG_WORD, (0, 1): "word " * 400, (0, 2): HOSTILE, (0, 3): "line\n" * 60},
        prompt="p" * 500,
    )
    page.set_content(f'<html><body style="margin:0;padding:16px">{render(records)}</body></html>')
    sizes = page.evaluate("""() => {
        const root = document.querySelector('.wb-groups');
        const cards = [...document.querySelectorAll('.wb-card')].map(c => c.getBoundingClientRect());
        const texts = [...document.querySelectorAll('.wb-text')].map(t => [t.scrollWidth, t.clientWidth]);
        return {page: document.documentElement.scrollWidth, root: root.getBoundingClientRect().right,
                rights: cards.map(c => c.right), tops: cards.map(c => Math.round(c.top)), texts: texts,
                heights: cards.map(c => c.height)};
    }""")
    assert sizes["page"] <= 1280, "the page scrolls sideways"
    assert max(sizes["rights"]) <= sizes["root"] + 0.5
    assert all(scroll <= client + 1 for scroll, client in sizes["texts"]), "a completion overflows its card"
    assert len(set(sizes["tops"][:4])) == 1, "the first cards should sit side by side in one row"
    assert max(sizes["heights"]) < 500, "a long completion should scroll inside its card"
