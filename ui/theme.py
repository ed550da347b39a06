"""Page-wide styles and one small script that make every page readable and usable by everyone.

* Contrast: Streamlit greys captions to 60 % of the text colour (3.9:1 on white, under WCAG AA's 4.5:1);
  here they keep 82 % of it (about 6:1 in the light theme, and as readable in the dark one).
* Long equations scroll inside their own block instead of running out of the page on a phone.
* Answer grids (ui/answer_grid) keep their rows × columns shape on a narrow screen: the row scrolls
  sideways rather than stacking the cells into one long column, and each row and column is numbered.
* A small table has no toolbar (it would cover the widget above it, on a phone most of all); the
  gradebook's big table keeps its own, with room above it.
* A scrolling block that holds nothing focusable gets tabindex=0 and a name, so a keyboard can scroll
  it (axe-core's scrollable-region-focusable), and a chart's SVG gets a name (svg-img-alt); the script
  does it again whenever the page changes.
"""

from __future__ import annotations

import json

import streamlit as st

from .i18n import tr

GRID_CLASS = "abh-grid"  # the key prefix of every answer grid's container (st-key-abh-grid-…)

CSS = """
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.82; }
[data-testid="stMarkdownContainer"] .katex-display { overflow-x: auto; overflow-y: hidden;
  padding: 0.3em 0.1em; margin: 0.4em 0; }
[class*="st-key-abh-grid-"] { overflow-x: auto; padding-bottom: 0.2rem; }
[class*="st-key-abh-grid-"] [data-testid="stHorizontalBlock"] { flex-wrap: nowrap !important; gap: 0.5rem; }
[class*="st-key-abh-grid-"] [data-testid="stHorizontalBlock"] > [data-testid="stElementContainer"] {
  min-width: 4rem !important; flex: 1 1 0 !important; width: auto !important; }
[class*="st-key-abh-grid-"] [data-testid="stHorizontalBlock"] > [data-testid="stElementContainer"]:has(.abh-grid-row) {
  min-width: 1.6rem !important; flex: 0 0 1.6rem !important; }
[class*="st-key-abh-grid-"] .abh-grid-heads { display: flex; gap: 0.5rem; }
[class*="st-key-abh-grid-"] .abh-grid-heads > span:first-child { flex: 0 0 1.6rem; }
[class*="st-key-abh-grid-"] .abh-grid-head { flex: 1 1 0; min-width: 4rem; text-align: center; font-size: 0.8rem; }
[class*="st-key-abh-grid-"] .abh-grid-row { font-size: 0.8rem; line-height: 2.5rem; margin: 0; }
[class*="st-key-abh-small-table"] [data-testid="stElementToolbar"] { display: none !important; }
[class*="st-key-abh-book-table"] { padding-top: 2rem; }
"""

SCRIPT = """
<script>
(() => {
  window.__abhScrollName = NAME;  // in the page's language, set again on every run
  window.__abhChartName = CHART;
  if (window.__abhScrollables) return;
  window.__abhScrollables = true;
  const FOCUSABLE = 'a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])';
  const scrolls = (el) => {
    const style = getComputedStyle(el);
    const x = /(auto|scroll)/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1;
    const y = /(auto|scroll)/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1;
    return x || y;
  };
  const mark = () => {
    for (const el of document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *')) {
      if (el.hasAttribute('data-abh-scroll') || !scrolls(el) || el.querySelector(FOCUSABLE)) continue;
      el.setAttribute('tabindex', '0');
      el.setAttribute('data-abh-scroll', '');
      if (!el.hasAttribute('role')) el.setAttribute('role', 'region');
      if (!el.hasAttribute('aria-label')) el.setAttribute('aria-label', window.__abhScrollName);
    }
  };
  const nameCharts = () => {
    // a Vega chart's SVG has role img: its name is the chart's description (on its container), else a
    // plain "Chart" (axe-core's svg-img-alt)
    for (const svg of document.querySelectorAll('svg[role="img"], svg[role="graphics-document"], '
                                                + 'svg [role="img"], svg [role="graphics-symbol"]')) {
      if (svg.getAttribute('aria-label') || svg.querySelector(':scope > title')) continue;
      const named = svg.parentElement && svg.parentElement.closest('[aria-label]');
      svg.setAttribute('aria-label', named ? named.getAttribute('aria-label') : window.__abhChartName);
    }
  };
  const focusReview = () => {
    // the paper review screen (ui/paper.py): each new cell's value box takes the keyboard, its value
    // selected, so the teacher types over it or presses Enter, cell after cell
    const box = document.querySelector('.st-key-paper-review input[type="text"]');
    const holder = box && box.closest('[class*="st-key-paper-value"]');
    const cell = holder ? holder.className : null;
    if (!box || cell === window.__abhReviewCell) return;
    window.__abhReviewCell = cell;
    box.focus();
    box.select();
  };
  let queued = false;
  const later = () => {
    if (queued) return;
    queued = true;
    setTimeout(() => { queued = false; mark(); nameCharts(); focusReview(); }, 150);
  };
  new MutationObserver(later).observe(document.body, {childList: true, subtree: true});
  window.addEventListener('resize', later);
  mark();
  nameCharts();
})();
</script>
"""


def apply() -> None:
    """Draw the styles and the script (call once per run, in app.py, before the page)."""
    st.html(f"<style>{CSS}</style>")
    script = SCRIPT.replace("NAME", json.dumps(tr("a11y.scroll_region"))).replace("CHART", json.dumps(tr("a11y.chart")))
    st.html(script, unsafe_allow_javascript=True)
