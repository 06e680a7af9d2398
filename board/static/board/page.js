// What every part of the board page shares: the server's board-config, the one board
// state (state.js) and the live socket once it is open.
import { createState, readFilters } from "./state.js";

export const config = JSON.parse(document.getElementById("board-config").textContent);
export const state = createState(config, readFilters(location.search));
export const label = (status) => config.labels[status] || status;
export const live = { socket: null };
