// Seed 001's three k6 load shapes, one script; bench/experiments/load.py sets the numbers.
// Every iteration is one GET of the VIP and then a 1 s pause, as the seed's iterations
// (about 1.15 s each) suggest; the breakpoint shape uses an arrival rate instead of VUs.
import http from "k6/http";
import { sleep } from "k6";

const shape = __ENV.SHAPE;
const vus = parseInt(__ENV.VUS || "1");
const ramp = `${__ENV.RAMP_S || "1"}s`;
const hold = `${__ENV.HOLD_S || "1"}s`;
const down = `${__ENV.DOWN_S || "0"}s`;
const rate = parseInt(__ENV.RATE || "10");
const bound = parseInt(__ENV.P95_BOUND_MS || "1000");

function scenario() {
  if (shape === "breakpoint") {
    return {
      executor: "ramping-arrival-rate",
      startRate: 1,
      timeUnit: "1s",
      preAllocatedVUs: 20,
      maxVUs: 200,
      stages: [{ target: rate, duration: ramp }],
    };
  }
  const stages = [
    { target: vus, duration: ramp },
    { target: vus, duration: hold },
  ];
  if (shape === "stress") stages.push({ target: 0, duration: down });
  return { executor: "ramping-vus", startVUs: 0, stages: stages, gracefulRampDown: "5s" };
}

export const options = {
  scenarios: { load: scenario() },
  summaryTrendStats: ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)"],
  thresholds:
    shape === "breakpoint"
      ? {
          http_req_failed: [{ threshold: "rate<0.01", abortOnFail: true, delayAbortEval: "3s" }],
          http_req_duration: [
            { threshold: `p(95)<${bound}`, abortOnFail: true, delayAbortEval: "3s" },
          ],
        }
      : {},
  noConnectionReuse: true, // one connection per request, as ab and the seed's HTTP/1.0 server
};

export default function () {
  http.get(__ENV.URL, { timeout: "30s" });
  if (shape !== "breakpoint") sleep(1);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data, null, 1) };
}
