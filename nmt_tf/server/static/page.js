// The page of `nmt-tf serve`: sends the text (or image) to the TF Serving REST API of the same
// server and draws the attention of the chosen hypothesis (rows: output pieces, columns:
// source pieces; for captions, one map over the image's annotation grid per word) and its
// words coloured by confidence. A typed start of the translation goes to the `prefix` (or
// `beam_search_prefix`) signature as it is typed; terminology, one phrase per line, to
// `beam_search_constrained`.
"use strict";

const config = JSON.parse(document.body.dataset.config);
const $ = (id) => document.getElementById(id);
const SETTINGS = ["beam_size", "nbest", "length_penalty"];
let imageB64 = null;
let typing = null;  // the timer of the completion asked for while typing
let sent = 0;  // requests sent: an answer to an older one than the last is dropped

function init() {
  const signatures = config.signatures.join(", ");
  $("model-line").textContent =
    `model ${config.model}, version ${config.version} (signatures: ${signatures})`;
  if (config.task === "caption") {
    $("text-input").hidden = true;
    $("image-input").hidden = false;
    $("go").textContent = "Caption";
    $("image").addEventListener("change", readImage);
    $("target-input").hidden = true;
  }
  if (config.target_languages && config.target_languages.length) {
    for (const language of config.target_languages) {
      const option = document.createElement("option");
      option.value = option.textContent = language;
      $("target_lang").append(option);
    }
    $("target-lang-label").hidden = false;
  }
  const prefixOk = config.signatures.includes("prefix");
  $("prefix").disabled = !prefixOk;
  $("terms").disabled = !config.signatures.includes("beam_search_constrained");
  if (!prefixOk) $("target-note").textContent = "(this export has no prefix signatures)";
  $("prefix").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { if ($("text").value.trim()) send(); }, 120);
  });
  if (!config.signatures.includes("beam_search")) {
    document.querySelector("input[value=beam_search]").disabled = true;
  }
  for (const key of SETTINGS) {
    $(key).value = config.beam[key] ?? "";
    $(key).disabled = !config.variants;
  }
  if (!config.variants) {
    $("beam-note").textContent = "(fixed when the model was exported)";
  }
  $("request").addEventListener("submit", (event) => { event.preventDefault(); send(); });
}

function readImage() {
  const file = $("image").files[0];
  if (!file) return;
  const reader = new FileReader();
  reader.onload = () => {
    $("preview").src = reader.result;
    imageB64 = reader.result.split(",", 2)[1];
  };
  reader.readAsDataURL(file);
}

// A text instance as an object of named inputs.
function asObject(instance) {
  return typeof instance === "string" ? { text: instance } : instance;
}

async function send() {
  const signature = document.querySelector("input[name=search]:checked").value;
  let instance;
  if (config.task === "caption") {
    if (!imageB64) { return status("Choose an image first.", true); }
    instance = { b64: imageB64 };
  } else {
    instance = $("text").value.trim();
    if (!instance) { return status("Type a sentence first.", true); }
  }
  let name = signature;
  const terms = config.task === "caption" ? [] : $("terms").value.split("\n")
    .map((t) => t.trim()).filter((t) => t);
  const prefix = config.task === "caption" ? "" : $("prefix").value;
  if (config.target_languages && config.target_languages.length) {
    instance = { ...asObject(instance), target_lang: $("target_lang").value };
  }
  if (terms.length) {
    name = "beam_search_constrained";
    instance = { ...asObject(instance), constraints: terms.join("\t") };
    $("target-note").textContent = prefix ? "(a typed start is not used with terminology)" : "";
  } else if (prefix) {
    name = signature === "beam_search" ? "beam_search_prefix" : "prefix";
    instance = { ...asObject(instance), prefix };
  }
  status("Working...");
  const url = `/v1/models/${config.model}/versions/${config.version}:predict`;
  const body = { signature_name: name, instances: [instance] };
  const number = ++sent;
  if (name === "beam_search" && config.variants) {
    body.parameters = {};
    for (const key of SETTINGS) body.parameters[key] = Number($(key).value);
  }
  let answer;
  try {
    const response = await fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    answer = await response.json();
    if (number !== sent) return;  // typed on: a newer request is on its way
    if (!response.ok) { return status(answer.error || response.statusText, true); }
  } catch (error) {
    return status(`The server did not answer: ${error}`, true);
  }
  status("");
  show(hypotheses(answer.predictions[0], name));
}

// The hypotheses of one prediction, best first: {text, score, logProb, targets, alignment}.
function hypotheses(p, signature) {
  const beam = signature.startsWith("beam_search");
  const list = (x) => (beam ? x : [x]);
  const caption = config.task === "caption";
  const texts = list(caption ? p.caption : p.translation);
  const out = [];
  texts.forEach((text, k) => {
    const length = list(caption ? p.caption_length : p.target_length)[k];
    if (!length) return;  // a missing hypothesis of the n-best list
    const alignment = list(caption ? p.attention : p.alignment)[k].slice(0, length);
    out.push({
      text, logProb: list(p.log_prob)[k], score: beam ? p.score[k] : list(p.log_prob)[k],
      targets: caption ? text.split(" ").concat(["</s>"]).slice(0, length)
        : list(p.target_tokens)[k].slice(0, length),
      sources: caption ? null : p.source_tokens.slice(0, p.source_length),
      words: caption || !p.words ? [] : list(p.words)[k].slice(0, list(p.word_count)[k]),
      wordLogProbs: caption || !p.words ? [] : list(p.word_log_prob)[k],
      alignment,
    });
  });
  return out;
}

function show(hyps) {
  $("results").hidden = false;
  const ol = $("hypotheses");
  ol.replaceChildren();
  hyps.forEach((h, k) => {
    const li = document.createElement("li");
    li.className = "hypothesis";
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = h.text;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = `score ${h.score.toFixed(3)}, log P ${h.logProb.toFixed(3)}`;
    li.append(text, score);
    li.addEventListener("click", () => choose(hyps, k));
    ol.append(li);
  });
  if (hyps.length) choose(hyps, 0);
  else $("attention").replaceChildren();
}

function choose(hyps, k) {
  document.querySelectorAll("#hypotheses li").forEach((li, i) => {
    li.classList.toggle("chosen", i === k);
  });
  const h = hyps[k];
  $("attention").replaceChildren(config.task === "caption" ? imageMaps(h) : heatmap(h));
  $("confidence").replaceChildren(...h.words.map((word, i) => {
    const span = document.createElement("span");
    const p = Math.exp(h.wordLogProbs[i]);
    span.className = "word";
    span.textContent = word;
    span.dataset.probability = p;
    span.title = `${word}: probability ${p.toFixed(3)}`;
    span.style.background = `hsl(${Math.round(120 * p)}, 70%, 80%)`;
    return span;
  }));
}

function colour(w) {
  const level = Math.round(255 * (1 - Math.min(Math.max(w, 0), 1)));
  return `rgb(${level}, ${Math.round(level * 0.9 + 25)}, 255)`;
}

function heatmap(h) {
  const table = document.createElement("table");
  table.className = "heatmap";
  const head = table.createTHead().insertRow();
  head.append(document.createElement("th"));
  h.sources.forEach((s) => {
    const th = document.createElement("th");
    th.className = "source";
    th.textContent = s;
    head.append(th);
  });
  const body = table.createTBody();
  h.alignment.forEach((row, i) => {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.className = "target";
    th.textContent = h.targets[i];
    tr.append(th);
    const weights = row.slice(0, h.sources.length);
    const hard = weights.indexOf(Math.max(...weights));
    weights.forEach((w, j) => {
      const td = tr.insertCell();
      td.style.background = colour(w);
      td.title = `${h.targets[i]} / ${h.sources[j]}: ${w.toFixed(3)}`;
      td.dataset.weight = w;
      if (j === hard) td.classList.add("hard");
    });
  });
  return table;
}

function imageMaps(h) {
  const div = document.createElement("div");
  div.className = "word-maps";
  h.alignment.forEach((weights, i) => {
    const side = Math.round(Math.sqrt(weights.length));
    const figure = document.createElement("figure");
    const canvas = document.createElement("canvas");
    canvas.width = side;
    canvas.height = side;
    canvas.className = "word-map";
    const context = canvas.getContext("2d");
    const top = Math.max(...weights);
    weights.forEach((w, c) => {
      context.fillStyle = `rgba(255, 140, 0, ${top > 0 ? w / top : 0})`;
      context.fillRect(c % side, Math.floor(c / side), 1, 1);
    });
    canvas.style.background = `center / cover url(${$("preview").src})`;
    canvas.title = h.targets[i];
    const caption = document.createElement("figcaption");
    caption.textContent = h.targets[i];
    figure.append(canvas, caption);
    div.append(figure);
  });
  return div;
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

init();
