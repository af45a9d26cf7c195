// Two small SVG charts drawn by hand: stacked bars (usage by day and model) and
// lines (requests per minute by alias). No library: the two charts need about
// a hundred lines, and the page stays one origin and a few kilobytes.
'use strict';

(function () {
  const NS = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#2563eb', '#16a34a', '#d97706', '#dc2626', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];
  const W = 640;
  const WIDE = 1000;
  const H = 220;
  const M = { left: 52, right: 12, top: 12, bottom: 30 };

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  function text(parent, x, y, content, anchor) {
    const node = el('text', { x, y, 'text-anchor': anchor || 'middle', class: 'axis-label' }, parent);
    node.textContent = content;
    return node;
  }

  function frame(container, label, w) {
    container.replaceChildren();
    const svg = el('svg', { viewBox: `0 0 ${w} ${H}`, width: w, height: H, role: 'img', 'aria-label': label, class: 'chart-svg' });
    container.appendChild(svg);
    return svg;
  }

  function niceMax(value) {
    if (value <= 0) return 1;
    // Small counts: an even maximum keeps the middle tick a whole number.
    if (value <= 10) return Math.max(2, Math.ceil(value / 2) * 2);
    const step = Math.pow(10, Math.floor(Math.log10(value)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * step >= value) return m * step;
    return 10 * step;
  }

  function yAxis(svg, max, w) {
    const plotH = H - M.top - M.bottom;
    for (const f of [0, 0.5, 1]) {
      const y = M.top + plotH * (1 - f);
      el('line', { x1: M.left, x2: w - M.right, y1: y, y2: y, class: 'grid' }, svg);
      const v = max * f;
      text(svg, M.left - 6, y + 4, Number.isInteger(v) ? String(v) : v.toFixed(1), 'end');
    }
  }

  function xLabels(svg, labels, xOf, every) {
    labels.forEach((label, i) => {
      const last = i === labels.length - 1;
      if ((i % every === 0 && labels.length - 1 - i >= every / 2) || last) text(svg, xOf(i), H - M.bottom + 16, label, last && every > 1 ? 'end' : 'middle');
    });
  }

  function legend(container, names) {
    const list = document.createElement('ul');
    list.className = 'legend';
    names.forEach((name, i) => {
      const item = document.createElement('li');
      const swatch = el('svg', { width: 10, height: 10, 'aria-hidden': 'true' });
      el('rect', { width: 10, height: 10, fill: PALETTE[i % PALETTE.length] }, swatch);
      item.append(swatch, ` ${name}`);
      list.appendChild(item);
    });
    container.appendChild(list);
  }

  function empty(svg, message, w) {
    text(svg, w / 2, H / 2, message).setAttribute('class', 'empty-label');
  }

  /** series: [{ name, values: number[] }] aligned with labels; bars stack the series. */
  function stackedBars(container, { labels, series, label, emptyMessage }) {
    const svg = frame(container, label, W);
    const totals = labels.map((_, i) => series.reduce((s, x) => s + (x.values[i] || 0), 0));
    const max = niceMax(Math.max(0, ...totals));
    const plotW = W - M.left - M.right;
    const plotH = H - M.top - M.bottom;
    const band = plotW / Math.max(1, labels.length);
    yAxis(svg, max, W);
    let drawn = 0;
    labels.forEach((day, i) => {
      let y = M.top + plotH;
      series.forEach((s, k) => {
        const v = s.values[i] || 0;
        if (v <= 0) return;
        const h = (v / max) * plotH;
        y -= h;
        const bar = el('rect', {
          x: M.left + i * band + band * 0.15, y, width: Math.max(1, band * 0.7), height: Math.max(1, h),
          fill: PALETTE[k % PALETTE.length], class: 'bar',
        }, svg);
        el('title', {}, bar).textContent = `${day} ${s.name}: ${v}`;
        drawn += 1;
      });
    });
    xLabels(svg, labels.map((d) => d.slice(5)), (i) => M.left + i * band + band / 2, Math.ceil(labels.length / 8));
    if (drawn === 0) empty(svg, emptyMessage || 'No data in this period.', W);
    svg.dataset.drawn = String(drawn);
    legend(container, series.map((s) => s.name));
  }

  /** series: [{ name, values: number[] }] aligned with labels; one line each. */
  function lines(container, { labels, series, label, emptyMessage }) {
    const svg = frame(container, label, WIDE);
    const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values)));
    const plotW = WIDE - M.left - M.right;
    const plotH = H - M.top - M.bottom;
    const xOf = (i) => M.left + (labels.length <= 1 ? 0 : (i * plotW) / (labels.length - 1));
    const yOf = (v) => M.top + plotH * (1 - v / max);
    yAxis(svg, max, WIDE);
    let drawn = 0;
    series.forEach((s, k) => {
      const d = s.values.map((v, i) => `${i === 0 ? 'M' : 'L'}${xOf(i).toFixed(1)},${yOf(v).toFixed(1)}`).join(' ');
      const path = el('path', { d, fill: 'none', stroke: PALETTE[k % PALETTE.length], 'stroke-width': 2, class: 'line' }, svg);
      el('title', {}, path).textContent = `${s.name}: ${s.values.reduce((a, b) => a + b, 0)} requests`;
      drawn += s.values.filter((v) => v > 0).length;
    });
    xLabels(svg, labels, xOf, Math.ceil(labels.length / 10));
    if (drawn === 0) empty(svg, emptyMessage || 'No data yet.', WIDE);
    svg.dataset.drawn = String(drawn);
    legend(container, series.map((s) => s.name));
  }

  window.SvcChart = { stackedBars, lines };
})();
