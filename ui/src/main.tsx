import { render } from "preact";
import { App } from "./app";
import { initLanguage } from "./strings";
import "./styles.css";

initLanguage();
const root = document.getElementById("app");
if (root) render(<App />, root);
