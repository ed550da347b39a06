() => {
  // per displayed matrix or array that holds a fraction: the smallest vertical gap, in px, between the
  // ink of two cells one above the other (canvas text metrics give each glyph run's ink above and below
  // its baseline; the baseline sits half the leading plus the font's ascent below the box's top)
  const canvas = document.createElement('canvas').getContext('2d');
  const ink = (el) => {
    const style = getComputedStyle(el);
    canvas.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const text = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
    const m = canvas.measureText(text);
    const r = el.getBoundingClientRect();
    const content = m.fontBoundingBoxAscent + m.fontBoundingBoxDescent;
    const baseline = r.top + (r.height - content) / 2 + m.fontBoundingBoxAscent;
    return {top: baseline - m.actualBoundingBoxAscent, bottom: baseline + m.actualBoundingBoxDescent};
  };
  const cellInk = (cell) => {
    let top = Infinity, bottom = -Infinity;
    for (const el of [cell, ...cell.querySelectorAll('*')]) {
      if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
      const box = ink(el);
      top = Math.min(top, box.top); bottom = Math.max(bottom, box.bottom);
    }
    for (const line of cell.querySelectorAll('.frac-line')) {
      const r = line.getBoundingClientRect();
      top = Math.min(top, r.top); bottom = Math.max(bottom, r.bottom);
    }
    return top === Infinity ? null : {top, bottom};
  };
  const out = [];
  for (const table of document.querySelectorAll('.katex-display .mtable')) {
    if (!table.querySelector('.mfrac')) continue;
    let least = Infinity;
    for (const col of table.children) {
      const vlist = col.querySelector('.vlist');
      if (!vlist) continue;
      const cells = [...vlist.children].map(cellInk).filter(Boolean);
      for (let k = 1; k < cells.length; k++) least = Math.min(least, cells[k].top - cells[k - 1].bottom);
    }
    out.push(Math.round(least * 10) / 10);
  }
  return out;
}
