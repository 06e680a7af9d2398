// A small, safe markdown for comments and chat: paragraphs and line breaks,
// **bold**, *italics* (or _italics_), `code`, fenced ``` blocks, [links](https://…)
// to http(s) only, and @-mentions. It builds DOM nodes from text -- never HTML
// strings -- so whatever is typed (<img onerror=…>, <script>) stays text.

const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|\b_[^_\n]+_\b)|(\[[^\]\n]+\]\([^)\s]+\))|((?<![\w@.])@[\w.+-]*\w)/;

function safeHref(url) {
  try {
    const parsed = new URL(url, location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (err) {
    return null;
  }
}

function inline(text, known) {
  const out = [];
  let rest = text;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) { out.push(document.createTextNode(rest)); break; }
    if (m.index) out.push(document.createTextNode(rest.slice(0, m.index)));
    const [token, code, bold, italic, link, mention] = m;
    if (code) {
      const node = document.createElement("code");
      node.textContent = code.slice(1, -1);
      out.push(node);
    } else if (bold) {
      const node = document.createElement("strong");
      node.append(...inline(bold.slice(2, -2), known));
      out.push(node);
    } else if (italic) {
      const node = document.createElement("em");
      node.append(...inline(italic.slice(1, -1), known));
      out.push(node);
    } else if (link) {
      const split = link.indexOf("](");
      const label = link.slice(1, split);
      const href = safeHref(link.slice(split + 2, -1));
      if (href) {
        const node = document.createElement("a");
        node.href = href;
        node.rel = "noopener noreferrer nofollow";
        node.target = "_blank";
        node.textContent = label;
        out.push(node);
      } else {
        out.push(document.createTextNode(link));  // javascript:, data: … stay text
      }
    } else if (mention) {
      const name = mention.slice(1);
      if (!known || known.has(name)) {
        const node = document.createElement("span");
        node.className = "mention";
        node.textContent = mention;
        out.push(node);
      } else {
        out.push(document.createTextNode(mention));
      }
    }
    rest = rest.slice(m.index + token.length);
  }
  return out;
}

// The rendered text as one <div class="md">; ``known`` (a Set of names, optional)
// limits which @names are shown as mentions.
export function markdown(text, known) {
  const root = document.createElement("div");
  root.className = "md";
  const blocks = String(text || "").replace(/\r\n?/g, "\n").split(/^```[^\n]*\n?/m);
  blocks.forEach((block, i) => {
    if (i % 2 === 1) {
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.textContent = block.replace(/\n$/, "");
      pre.append(code);
      root.append(pre);
      return;
    }
    for (const para of block.split(/\n{2,}/)) {
      if (!para.trim()) continue;
      const p = document.createElement("p");
      para.split("\n").forEach((line, j) => {
        if (j) p.append(document.createElement("br"));
        p.append(...inline(line, known));
      });
      root.append(p);
    }
  });
  return root;
}
