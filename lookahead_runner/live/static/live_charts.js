// Charts beside the table of the "vLLM live" and "vLLM history" tabs (lookahead_runner/live).
//
// Locust's page is a React app whose extended tabs render a table only, so this script adds a panel
// next to that table while one of these tabs is selected, and removes it when another tab is. What to
// draw comes from window.templateArgs.lookahead_charts (live/charts.py CHARTS); the data from
// charts.json, asked every two seconds for what is newer than the last tick held. plotly.js is the
// copy the installed plotly package ships, served by the same web UI (no network).
(() => {
  "use strict";
  const config = (window.templateArgs || {}).lookahead_charts;
  if (!config || !window.Plotly) return;

  const PANEL_CLASS = "lookahead-charts";
  const GRID_CLASS = "lookahead-with-charts";
  const TABLE_CLASS = "lookahead-table";
  const STAGE_LINE = { type: "line", xref: "x", yref: "paper", y0: 0, y1: 1,
                       line: { color: "rgba(128,128,128,0.7)", width: 1, dash: "dot" } };
  const state = { session: null, after: 0, setting: "", columns: {}, marks: [], drawn: false,
                  timer: null, inFlight: false, error: "" };
  let panel = null;
  let grid = null;

  const style = document.createElement("style");
  style.textContent = `
    .${GRID_CLASS} { display: grid !important; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr);
                     column-gap: 16px; align-items: start; }
    .${GRID_CLASS} > * { grid-column: 1 / -1; }
    .${GRID_CLASS} > .${TABLE_CLASS} { grid-column: 1; grid-row: 2; }
    .${GRID_CLASS} > .${PANEL_CLASS} { grid-column: 2; grid-row: 2; }
    @media (max-width: 1000px) {
      .${GRID_CLASS} > .${TABLE_CLASS}, .${GRID_CLASS} > .${PANEL_CLASS} { grid-column: 1 / -1; grid-row: auto; }
    }
    .${PANEL_CLASS} .lookahead-charts-head { font: 0.85rem sans-serif; opacity: 0.8; margin: 4px 0 2px 8px; }
    .${PANEL_CLASS} .lookahead-chart { height: 230px; }`;
  document.head.appendChild(style);

  // plotly reads a subset of HTML in every text it draws (<a href> makes a link): text from the server (a setting's
  // name, a stage's label) is given to it with its markup as entities, so it shows as written
  const plotlyText = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const pad = (n, width = 2) => String(n).padStart(width, "0");
  // plotly shows date strings as written: local time, as Locust's own charts
  const localTime = (t_s) => {
    const d = new Date(t_s * 1000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
           `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  };

  function selectedTitle() {
    const tab = document.querySelector('[role="tab"][aria-selected="true"]');
    return tab ? tab.textContent.trim() : "";
  }

  function buildPanel() {
    const element = document.createElement("div");
    element.className = PANEL_CLASS;
    const head = document.createElement("div");
    head.className = "lookahead-charts-head";
    element.appendChild(head);
    for (const chart of config.charts) {
      const div = document.createElement("div");
      div.className = "lookahead-chart";
      div.dataset.chart = chart.key;
      element.appendChild(div);
    }
    return element;
  }

  function chartDivs() {
    return config.charts.map((chart) => [chart, panel.querySelector(`[data-chart="${chart.key}"]`)]);
  }

  // the table of our tab, its box and the box holding the tab bar too: the panel joins that last one
  function place() {
    const ours = config.tabs.includes(selectedTitle());
    const table = ours ? document.querySelector("main table") : null;
    const tableBox = table ? table.parentElement : null;
    const container = tableBox ? tableBox.parentElement : null;
    if (!container) {
      detach();
      return;
    }
    if (grid && grid !== container) grid.classList.remove(GRID_CLASS);
    grid = container;
    grid.classList.add(GRID_CLASS);
    tableBox.classList.add(TABLE_CLASS);
    if (!panel) panel = buildPanel();
    if (panel.parentElement !== container) {
      container.appendChild(panel);
      state.drawn = false;
      draw();
    }
    if (!state.timer) {
      poll();
      state.timer = setInterval(poll, config.poll_ms);
    }
  }

  function detach() {
    if (state.timer) clearInterval(state.timer);
    state.timer = null;
    if (grid) grid.classList.remove(GRID_CLASS);
    grid = null;
    if (panel && panel.parentElement) {
      for (const [, div] of chartDivs()) window.Plotly.purge(div);
      panel.remove();
    }
    state.drawn = false;
  }

  function traces(chart) {
    const x = (state.columns.t_s || []).map(localTime);
    const lines = chart.series.map((series) => ({
      type: "scatter", mode: "lines", name: plotlyText(series.name), x: x.slice(), y: (state.columns[series.column] || []).slice(),
      yaxis: series.axis, line: { dash: series.dash, shape: series.shape, width: 1.5 }, connectgaps: false,
    }));
    if (chart.preemptions) {
      const marks = state.marks.filter((mark) => mark.kind === "preemptions");
      lines.push({ type: "scatter", mode: "markers", name: "preemptions", x: marks.map((m) => localTime(m.t_s)),
                   y: marks.map((m) => m.value), text: marks.map((m) => plotlyText(m.label)), hoverinfo: "x+text",
                   marker: { symbol: "x", size: 9, color: "#d62728" } });
    }
    return lines;
  }

  function layout(chart, first) {
    const stages = state.marks.filter((mark) => mark.kind === "stage");
    const ink = getComputedStyle(panel).color || "#444";
    const title = plotlyText(state.setting ? `${chart.title} · ${state.setting}` : chart.title);
    const axis = { gridcolor: "rgba(128,128,128,0.25)", zerolinecolor: "rgba(128,128,128,0.4)" };
    return {
      title: { text: title, font: { size: 13 }, x: 0.01, xanchor: "left" },
      height: 230, margin: { l: 55, r: chart.y2_title ? 55 : 15, t: 30, b: 30 },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", font: { color: ink, size: 11 },
      showlegend: true, legend: { orientation: "h", x: 1, xanchor: "right", y: 1.12, font: { size: 10 } },
      xaxis: { ...axis, type: "date" },
      yaxis: { ...axis, title: { text: chart.y_title }, rangemode: "tozero",
               ...(chart.y_max ? { range: [0, chart.y_max] } : {}) },
      ...(chart.y2_title ? { yaxis2: { title: { text: chart.y2_title }, overlaying: "y", side: "right",
                                       rangemode: "tozero", showgrid: false, tickformat: ".1f" } } : {}),
      shapes: stages.map((mark) => ({ ...STAGE_LINE, x0: localTime(mark.t_s), x1: localTime(mark.t_s) })),
      annotations: first ? stages.map((mark) => ({ x: localTime(mark.t_s), y: 1, xref: "x", yref: "paper",
                                                   text: plotlyText(mark.label), showarrow: false, xanchor: "left",
                                                   yanchor: "top", font: { size: 10 } })) : [],
    };
  }

  function header() {
    const head = panel.querySelector(".lookahead-charts-head");
    const ticks = (state.columns.t_s || []).length;
    const setting = state.setting ? `setting ${state.setting}` : "setting not given (--setting-name)";
    head.textContent = `${setting} · ${ticks} s of one-second history` +
                       (state.error ? ` · charts not updated: ${state.error}` : "");
  }

  const PLOT_CONFIG = { displaylogo: false, displayModeBar: false, responsive: true };

  function draw() {
    if (!panel || !panel.parentElement) return;
    header();
    chartDivs().forEach(([chart, div], index) => {
      window.Plotly.react(div, traces(chart), layout(chart, index === 0), PLOT_CONFIG);
    });
    state.drawn = true;
  }

  // new ticks only: append them to the lines drawn rather than drawing hours of history again
  function extend(count) {
    header();
    const x = state.columns.t_s.slice(-count).map(localTime);
    for (const [chart, div] of chartDivs()) {
      const indices = chart.series.map((_, index) => index);
      const update = { x: indices.map(() => x),
                       y: chart.series.map((series) => state.columns[series.column].slice(-count)) };
      window.Plotly.extendTraces(div, update, indices, config.max_points);
    }
  }

  // an answer of charts.json -> the ticks and marks it added, or null when the history restarted
  function absorb(update) {
    if (update.session !== state.session) {
      const restarted = state.session !== null;
      Object.assign(state, { session: update.session, after: 0, columns: {}, marks: [], drawn: false });
      if (restarted) return null; // Locust's Reset Stats: what was fetched belongs to the old history
    }
    state.setting = update.setting;
    const times = update.columns.t_s || [];
    for (const [name, values] of Object.entries(update.columns)) {
      const held = state.columns[name] || (state.columns[name] = []);
      held.push(...values);
      if (held.length > config.max_points) held.splice(0, held.length - config.max_points);
    }
    state.marks.push(...update.marks);
    if (times.length) state.after = times[times.length - 1];
    return { ticks: times.length, marks: update.marks.length };
  }

  async function poll() {
    if (state.inFlight) return;
    state.inFlight = true;
    let added = { ticks: 0, marks: 0 };
    const hadError = state.error !== "";
    try {
      const response = await fetch(`${config.url}?after=${state.after}`, { cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      added = absorb(await response.json());
      state.error = "";
    } catch (error) {
      state.error = String(error.message || error);
    } finally {
      state.inFlight = false;
    }
    if (!panel || !panel.parentElement) return;
    if (added === null) {
      poll();
    } else if (!state.drawn || added.marks || hadError !== (state.error !== "")) {
      draw();
    } else if (added.ticks) {
      extend(added.ticks);
    }
  }

  let scheduled = false;
  new MutationObserver((mutations) => {
    if (scheduled || mutations.every((m) => panel && panel.contains(m.target))) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; place(); });
  }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["aria-selected"] });
  place();
})();
