// A todo app built from two custom elements, <todo-app> and <todo-item>,
// each rendering into its own OPEN shadow root. Written for Airlock's
// browser tests; no dependencies.
//
// index.html?light renders the same components into their light DOM
// instead (no shadow roots), for drivers whose CSS selectors do not
// pierce shadow roots.
"use strict";

const LIGHT = new URLSearchParams(location.search).has("light");
const STORE = "airlock-todos";

// mount gives el its render root: an open shadow root, or el itself in
// light mode, where :host rules are rewritten to the element's tag.
function mount(el, css, html) {
  const tag = el.localName;
  let root = el;
  if (LIGHT) {
    css = css.replace(/:host\(([^)]*)\)/g, tag + "$1").replace(/:host/g, tag);
  } else {
    root = el.attachShadow({ mode: "open" });
  }
  root.innerHTML = "<style>" + css + "</style>" + html;
  return root;
}

const itemCSS = `
:host { display: block; position: relative; font-size: 24px; border-bottom: 1px solid #ededed; }
.view { display: flex; align-items: center; min-height: 58px; }
.toggle { width: 40px; height: 40px; margin: 0 10px; flex: none; cursor: pointer; }
label.title { flex: 1; padding: 15px 15px 15px 5px; word-break: break-all; line-height: 1.2; transition: color 0.4s; }
:host(.completed) label.title { color: #949494; text-decoration: line-through; }
.destroy { display: none; width: 40px; height: 40px; margin-right: 10px; border: 0; background: none;
  font-size: 30px; color: #949494; cursor: pointer; }
.destroy:hover { color: #c18585; }
:host(:hover) .destroy { display: block; }
.edit { display: none; box-sizing: border-box; width: calc(100% - 43px); margin: 0 0 0 43px; padding: 12px 16px;
  font: inherit; border: 1px solid #999; box-shadow: inset 0 -1px 5px 0 rgba(0, 0, 0, 0.2); }
:host(.editing) .view { display: none; }
:host(.editing) .edit { display: block; }
`;

// <todo-item> shows one todo. It tells its app what the user did through
// composed events (todo-toggle, todo-destroy, todo-save).
class TodoItem extends HTMLElement {
  connectedCallback() { this.init(); }

  // init renders the element once (not in the constructor: an element
  // made by createElement may not gain children there).
  init() {
    if (this.root) return;
    this.root = mount(this, itemCSS, `
<div class="view">
  <input class="toggle" type="checkbox">
  <label class="title"></label>
  <button class="destroy" aria-label="Delete">×</button>
</div>
<input class="edit" aria-label="Edit todo">`);
    this.toggle = this.root.querySelector(".toggle");
    this.label = this.root.querySelector("label.title");
    this.edit = this.root.querySelector(".edit");
    this.toggle.addEventListener("change", () => this.tell("todo-toggle", { completed: this.toggle.checked }));
    this.root.querySelector(".destroy").addEventListener("click", () => this.tell("todo-destroy", {}));
    this.label.addEventListener("dblclick", () => this.startEdit());
    this.edit.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.finishEdit(true);
      else if (e.key === "Escape") this.finishEdit(false);
    });
    this.edit.addEventListener("blur", () => this.finishEdit(true));
  }

  tell(type, detail) {
    detail.id = this.todoId;
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  set todo(t) {
    this.init();
    this.todoId = t.id;
    this.label.textContent = t.title;
    this.toggle.checked = t.completed;
    this.classList.toggle("completed", t.completed);
  }

  startEdit() {
    this.classList.add("editing");
    this.edit.value = this.label.textContent;
    this.edit.focus();
    this.edit.setSelectionRange(this.edit.value.length, this.edit.value.length);
  }

  finishEdit(save) {
    if (!this.classList.contains("editing")) return;
    this.classList.remove("editing");
    if (save) this.tell("todo-save", { title: this.edit.value.trim() });
  }
}

const appCSS = `
:host { display: block; }
h1 { margin: 0; padding-top: 20px; text-align: center; font-size: 80px; font-weight: 200; color: #b83f45; }
.card { position: relative; margin: 30px 0 40px; background: #fff;
  box-shadow: 0 2px 4px 0 rgba(0, 0, 0, 0.2), 0 25px 50px 0 rgba(0, 0, 0, 0.1); }
.new-todo { box-sizing: border-box; width: 100%; padding: 16px 16px 16px 60px; border: none; font: inherit;
  font-size: 24px; background: rgba(0, 0, 0, 0.003); box-shadow: inset 0 -2px 1px rgba(0, 0, 0, 0.03); }
.new-todo::placeholder { font-style: italic; color: rgba(0, 0, 0, 0.4); }
.main { position: relative; border-top: 1px solid #e6e6e6; }
/* The checkbox is 1 px and transparent, under the centre of its label
   (the chevron left of the new-todo field), which covers it: a click at
   the checkbox's centre lands on the label, which is what a person clicks. */
.toggle-all { width: 1px; height: 1px; margin: 0; padding: 0; border: none; opacity: 0; position: absolute;
  top: -33px; left: 30px; }
.toggle-all + label { position: absolute; z-index: 1; top: -65px; left: 0; width: 60px; height: 65px; display: flex;
  align-items: center; justify-content: center; font-size: 0; cursor: pointer; }
.toggle-all + label::before { content: "❯"; display: inline-block; font-size: 22px; color: #949494;
  transform: rotate(90deg); }
.toggle-all:checked + label::before { color: #484848; }
.todo-list { margin: 0; padding: 0; list-style: none; }
.footer { display: flex; align-items: center; justify-content: space-between; padding: 10px 15px;
  color: #111; border-top: 1px solid #e6e6e6; }
.filters { display: flex; gap: 6px; margin: 0; padding: 0; list-style: none; }
.filters a { color: inherit; padding: 3px 7px; text-decoration: none; border: 1px solid transparent; border-radius: 3px; }
.filters a.selected { border-color: #ce4646; }
.clear-completed { border: 0; background: none; font: inherit; cursor: pointer; }
.clear-completed:hover { text-decoration: underline; }
[hidden] { display: none !important; }
`;

// <todo-app> holds the todos, persists them in localStorage and routes
// the filter from the location hash (#/, #/active, #/completed).
class TodoApp extends HTMLElement {
  connectedCallback() {
    if (!this.root) this.init();
    this.render();
    this.input.focus();
  }

  init() {
    this.root = mount(this, appCSS, `
<header>
  <h1>todos</h1>
</header>
<div class="card">
  <input id="new-todo" class="new-todo" placeholder="What needs to be done?" aria-label="New todo">
  <section class="main" id="main">
    <input id="toggle-all" class="toggle-all" type="checkbox">
    <label for="toggle-all">Mark all as complete</label>
    <ul class="todo-list" id="todo-list"></ul>
  </section>
  <footer class="footer" id="footer">
    <span class="todo-count" id="todo-count"></span>
    <ul class="filters">
      <li><a href="#/" data-filter="all">All</a></li>
      <li><a href="#/active" data-filter="active">Active</a></li>
      <li><a href="#/completed" data-filter="completed">Completed</a></li>
    </ul>
    <button class="clear-completed" id="clear-completed">Clear completed</button>
  </footer>
</div>`);
    const $ = (sel) => this.root.querySelector(sel);
    this.input = $("#new-todo");
    this.main = $("#main");
    this.footer = $("#footer");
    this.list = $("#todo-list");
    this.count = $("#todo-count");
    this.toggleAll = $("#toggle-all");
    this.clear = $("#clear-completed");
    this.items = new Map(); // todo id -> <li> holding its <todo-item>
    this.todos = this.load();

    this.input.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      const title = this.input.value.trim();
      if (title === "") return;
      this.todos.push({ id: Date.now().toString(36) + Math.random().toString(36).slice(2, 7), title, completed: false });
      this.input.value = "";
      this.changed();
    });
    this.toggleAll.addEventListener("change", () => {
      for (const t of this.todos) t.completed = this.toggleAll.checked;
      this.changed();
    });
    this.clear.addEventListener("click", () => {
      this.todos = this.todos.filter((t) => !t.completed);
      this.changed();
    });
    this.root.addEventListener("todo-toggle", (e) => this.update(e.detail.id, (t) => { t.completed = e.detail.completed; }));
    this.root.addEventListener("todo-destroy", (e) => this.remove(e.detail.id));
    this.root.addEventListener("todo-save", (e) => {
      if (e.detail.title === "") this.remove(e.detail.id);
      else this.update(e.detail.id, (t) => { t.title = e.detail.title; });
    });
    window.addEventListener("hashchange", () => this.render());
  }

  load() {
    try {
      const v = JSON.parse(localStorage.getItem(STORE) || "[]");
      return Array.isArray(v) ? v : [];
    } catch (e) {
      return [];
    }
  }

  update(id, f) {
    const t = this.todos.find((t) => t.id === id);
    if (t) f(t);
    this.changed();
  }

  remove(id) {
    this.todos = this.todos.filter((t) => t.id !== id);
    this.changed();
  }

  changed() {
    localStorage.setItem(STORE, JSON.stringify(this.todos));
    this.render();
  }

  filter() {
    const f = location.hash.replace(/^#\/?/, "");
    return f === "active" || f === "completed" ? f : "all";
  }

  // render updates the list in place: an item keeps its element (and so
  // its refs) for as long as it is shown.
  render() {
    const filter = this.filter();
    const shown = this.todos.filter((t) => filter === "all" || (filter === "completed") === t.completed);
    const keep = new Set(shown.map((t) => t.id));
    for (const [id, li] of this.items) {
      if (!keep.has(id)) {
        li.remove();
        this.items.delete(id);
      }
    }
    shown.forEach((t, i) => {
      let li = this.items.get(t.id);
      if (!li) {
        li = document.createElement("li");
        li.appendChild(document.createElement("todo-item"));
        this.items.set(t.id, li);
      }
      li.firstChild.todo = t;
      if (this.list.children[i] !== li) this.list.insertBefore(li, this.list.children[i] || null);
    });

    const left = this.todos.filter((t) => !t.completed).length;
    this.count.innerHTML = "<strong>" + left + "</strong> " + (left === 1 ? "item" : "items") + " left";
    this.main.hidden = this.footer.hidden = this.todos.length === 0;
    this.toggleAll.checked = this.todos.length > 0 && left === 0;
    this.clear.hidden = this.todos.length === left;
    for (const a of this.root.querySelectorAll(".filters a")) {
      a.classList.toggle("selected", a.dataset.filter === filter);
    }
  }
}

customElements.define("todo-item", TodoItem);
customElements.define("todo-app", TodoApp);
