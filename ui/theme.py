"""Page-wide styles and one small script that make every page readable and usable by everyone.

* Contrast: Streamlit greys captions to 60 % of the text colour (3.9:1 on white, under WCAG AA's 4.5:1);
  here they keep 82 % of it (about 6:1 in the light theme, and as readable in the dark one).
* Long equations scroll inside their own block instead of running out of the page on a phone, and a
  block that scrolls says so: its edge fades out on the side where more of it is hidden (a scroll-driven
  animation, only on the blocks the script below finds scrolling: a solution's many blocks that fit cost
  the browser no animation).
* Answer grids (ui/answer_grid) keep their rows × columns shape on a narrow screen: the row scrolls
  sideways rather than stacking the cells into one long column, and each row and column is numbered.
  Each grid brings its own rules, by its container's class (grid_style): no :has() and no class matched
  by a part of its name, which the browser tries on every element at every change of the page.
* A small table has no toolbar (it would cover the widget above it, on a phone most of all); the
  gradebook's big table keeps its own, with room above it (table, by the container's class).
* A scrolling block that holds nothing focusable gets tabindex=0 and a name, so a keyboard can scroll
  it (axe-core's scrollable-region-focusable), and a chart's SVG gets a name (svg-img-alt). Only what a
  change drew is looked at (the elements added and the blocks around a change, from the
  MutationObserver's records), once a frame in an animation-frame callback, before the browser paints
  and before any other script runs: no check ever sees them unnamed, and a run's many small commits
  force no extra layout. The whole page is looked at only when the window's width or the fonts change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from .i18n import tr

# One grid's shape, by its container's own class: a rule whose every part names a class the browser can
# look up (a class selected by a substring of its name is tried on every element the page has, at every
# change of the page). A row's number, when the grid has them, is drawn by the row itself (a CSS counter):
# no element of its own, and not read out (the cells' names say their row).
_GRID = """
.st-key-{key} {{ overflow-x: auto; padding-bottom: 0.2rem; }}
.st-key-{key} .stHorizontalBlock {{ flex-wrap: nowrap !important; gap: 0.5rem; }}
.st-key-{key} .stHorizontalBlock > .stElementContainer {{
  min-width: 4rem !important; flex: 1 1 0 !important; width: auto !important; }}
"""
_GRID_ROW_NUMBER = """.st-key-{key} {{ counter-reset: abh-row; }}
.st-key-{key} .stHorizontalBlock {{ counter-increment: abh-row; }}
.st-key-{key} .stHorizontalBlock::before {{ content: counter(abh-row) / ""; flex: 0 0 1.6rem;
  font-size: 0.8rem; line-height: 2.5rem; }}
"""


@contextmanager
def table(key: str, toolbar: bool) -> Iterator[None]:
    """A container keyed `key` for one table, with its style: a small table shows no toolbar (it would
    cover the widget above it, on a phone most of all), a big one keeps its own, with room above it."""
    with st.container(key=key):
        if toolbar:
            st.html(f"<style>.st-key-{key} {{ padding-top: 2rem; }}</style>")
        else:
            st.html(f'<style>.st-key-{key} [data-testid="stElementToolbar"] {{ display: none !important; }}</style>')
        yield


def grid_style(key: str, numbered: bool) -> str:
    """The <style> that keeps the grid in the container keyed `key` a grid (ui/answer_grid draws it
    with the grid's first element, so the grid never shows without it)."""
    return "<style>" + _GRID.format(key=key) + (_GRID_ROW_NUMBER.format(key=key) if numbered else "") + "</style>"


# Streamlit's HTML sanitizer drops a <style> whose text holds a "<": write it as the CSS escape \3C.
CSS = """
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.82; }
[data-testid="stMarkdownContainer"] .katex-display { overflow-x: auto; overflow-y: hidden;
  padding: 0.3em 0.1em; margin: 0.4em 0; }
.katex-display[data-abh-scroll] { --abh-fade-left: 0px; --abh-fade-right: 0px;
  mask-image: linear-gradient(to right, transparent, #000 var(--abh-fade-left),
                              #000 calc(100% - var(--abh-fade-right)), transparent);
  animation: abh-scroll-edges linear both; animation-timeline: scroll(self inline); }
@property --abh-fade-left { syntax: "\\3C length>"; inherits: false; initial-value: 0px; }
@property --abh-fade-right { syntax: "\\3C length>"; inherits: false; initial-value: 0px; }
@keyframes abh-scroll-edges {
  0% { --abh-fade-left: 0px; --abh-fade-right: 2.5em; }
  8% { --abh-fade-left: 2.5em; }
  92% { --abh-fade-right: 2.5em; }
  100% { --abh-fade-left: 2.5em; --abh-fade-right: 0px; }
}
.abh-grid-heads { display: flex; gap: 0.5rem; }
.abh-grid-heads > span:first-child { flex: 0 0 1.6rem; }
.abh-grid-head { flex: 1 1 0; min-width: 4rem; text-align: center; font-size: 0.8rem; }
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
  const markAll = (elements) => {
    for (const el of elements) {
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
  // What changed since the last frame: the elements added or opened (an expander, a tab: each with what
  // it holds) and the elements whose children changed (they and the blocks around them may scroll now).
  // They are looked at once a frame, in an animation-frame callback: the browser lays the page out for
  // that frame anyway, so a run's many small commits force no extra layout, and the page is never
  // measured whole again (before any check can run, as an animation frame comes before the next task).
  let added = new Set(), changed = new Set(), frame = 0;
  const flush = () => {
    frame = 0;
    const seen = new Set();
    for (const node of added) {
      if (!node.isConnected) continue;
      seen.add(node);
      for (const el of node.querySelectorAll('*')) seen.add(el);
    }
    for (const target of changed) {
      for (let el = target; el && el.nodeType === 1 && !seen.has(el); el = el.parentElement) seen.add(el);
    }
    added = new Set();
    changed = new Set();
    markAll(seen);
    nameCharts();
    // the review box once React has settled its value (selected before that, the selection is lost)
    if (window.requestIdleCallback) requestIdleCallback(focusReview, {timeout: 300}); else setTimeout(focusReview, 150);
  };
  const drawn = (records) => {
    for (const record of records) {
      if (record.type === 'attributes') added.add(record.target);  // opened or shown: what it holds is seen now
      else changed.add(record.target);
      for (const node of record.addedNodes) if (node.nodeType === 1) added.add(node);
    }
    if (!frame) frame = requestAnimationFrame(flush);
  };
  const whole = () => {  // a new width or new fonts can make any block scroll: the whole page, once
    markAll(document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *'));
    nameCharts();
  };
  new MutationObserver(drawn).observe(document.body, {childList: true, subtree: true, attributes: true,
                                                    attributeFilter: ['open', 'hidden', 'aria-expanded']});
  window.addEventListener('resize', whole);
  document.fonts.addEventListener('loadingdone', whole);  // KaTeX's fonts widen an equation once loaded
  whole();
})();
</script>
"""


def apply() -> None:
    """Draw the styles and the script (call once per run, in app.py, before the page)."""
    st.html(f"<style>{CSS}</style>")
    script = SCRIPT.replace("NAME", json.dumps(tr("a11y.scroll_region"))).replace("CHART", json.dumps(tr("a11y.chart")))
    st.html(script, unsafe_allow_javascript=True)
