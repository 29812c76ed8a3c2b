#!/usr/bin/env node
// llama.cpp's side of bench/compare-llamacpp: prompt processing and generation speed of the CPU
// build of llama.cpp bundled in node-llama-cpp 3.22.1 (llama.cpp v0.5.0), measured the way
// `clover bench` measures clover.cpp, printed as JSON records with the same fields.
//
//   node bench/llama_bench.mjs MODEL.gguf [--pp 512,1024] [--tg 128] [--threads 1,2] [--reps 1]
//        [--flash-attn auto|on|off] [--no-warmup]
//   node bench/llama_bench.mjs --baseline        (loads node-llama-cpp only: node's own memory)
//
// ppP: a fresh context evaluates P random tokens (batch 512). tgN: after a one-token prompt, N
// greedy single-token decode steps. Times are llama.cpp's own (llama_perf: "prompt eval time",
// "eval time"), which leave out the JavaScript loop around each step; the wall-clock rates with the
// loop are reported beside them (wall_ts). Every context is new, so llama_perf counts that test only.
import fs from "node:fs";
import path from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const USAGE = "usage: node bench/llama_bench.mjs MODEL.gguf [--pp 512] [--tg 128] [--threads 1,2] [--reps 1] " +
    "[--flash-attn auto|on|off] [--no-warmup] | --baseline";

function fail(msg, code = 1) {
    process.stderr.write(`llama_bench: ${msg}\n`);
    process.exit(code);
}

function parseArgs(argv) {
    const o = {pp: "512", tg: "128", threads: "1,2", reps: "1", "flash-attn": "auto"};
    const pos = [];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === "--no-warmup" || a === "--baseline" || a === "--help") o[a.slice(2)] = true;
        else if (a.startsWith("--")) {
            if (i + 1 >= argv.length) fail(`option ${a} needs a value`, 2);
            o[a.slice(2)] = argv[++i];
        } else pos.push(a);
    }
    return {o, pos};
}

function intList(name, s, min) {
    const out = String(s).split(",").filter((x) => x.length > 0).map(Number);
    for (const v of out) if (!Number.isInteger(v) || v < min) fail(`--${name}: "${s}" is not a list of integers >= ${min}`, 2);
    if (out.length === 0) fail(`--${name} is empty`, 2);
    return out;
}

const logLines = [];
function logger(_level, message) {
    logLines.push(String(message));
}

// The llama_perf lines printed by printTimings() for the context just used.
async function perfOf(context) {
    logLines.length = 0;
    await context.printTimings();
    await new Promise((r) => setTimeout(r, 30)); // log callbacks arrive asynchronously
    const perf = {};
    for (const text of logLines) {
        const m = /(prompt eval|eval) time\s*=\s*([\d.]+) ms\s*\/\s*(\d+) (?:tokens|runs)/.exec(text);
        if (m) perf[m[1] === "prompt eval" ? "prompt" : "decode"] = {ms: Number(m[2]), n: Number(m[3])};
    }
    return perf;
}

function randomTokens(n, nVocab, seed) {
    let x = (seed * 2654435761 + n) >>> 0 || 1;
    const t = [];
    for (let i = 0; i < n; i++) {
        x ^= x << 13, x >>>= 0, x ^= x >>> 17, x ^= x << 5, x >>>= 0;
        t.push(x % nVocab);
    }
    return t;
}

function summary(v) {
    const mean = v.reduce((a, b) => a + b, 0) / v.length;
    const sd = v.length > 1 ? Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1)) : 0;
    const s = [...v].sort((a, b) => a - b);
    const median = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    return {mean, sd, median};
}

async function main() {
    const {o, pos} = parseArgs(process.argv.slice(2));
    if (o.help) return process.stdout.write(USAGE + "\n");
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.info, logger, progressLogs: false});
    if (o.baseline) {
        process.stdout.write(JSON.stringify({engine: "node-llama-cpp", llama_cpp: llama.llamaCppRelease?.release ?? null,
            max_rss_bytes: process.resourceUsage().maxRSS * 1024}) + "\n");
        return;
    }
    if (pos.length !== 1) fail(USAGE, 2);
    const modelPath = pos[0];
    if (!fs.existsSync(modelPath)) fail(`model file not found: ${modelPath}`);
    const pp = intList("pp", o.pp, 0).filter((p) => p > 0), tg = intList("tg", o.tg, 0).filter((n) => n > 0);
    const threadList = intList("threads", o.threads, 1);
    const reps = intList("reps", o.reps, 1)[0];
    if (!["auto", "on", "off"].includes(o["flash-attn"])) fail("--flash-attn must be auto, on or off", 2);
    const flashAttention = o["flash-attn"] === "auto" ? "auto" : o["flash-attn"] === "on";
    const warmups = o["no-warmup"] ? 0 : 1;

    let model;
    try {
        model = await llama.loadModel({modelPath, gpuLayers: 0});
    } catch (e) {
        fail(`failed to load ${modelPath}: ${e.message}\n  ${logLines.slice(-5).join("\n  ")}`);
    }
    const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (typeof nVocab !== "number") fail("the model has no tokenizer.ggml.tokens: cannot tell n_vocab");
    const base = {engine: "llama.cpp", llama_cpp: llama.llamaCppRelease?.release ?? null,
        model: path.basename(modelPath, ".gguf"), model_path: modelPath, size_bytes: model.size,
        description: model.typeDescription, flash_attn: o["flash-attn"]};
    const newContext = (n, threads) => model.createContext({
        contextSize: Math.max(256, Math.ceil((n + 8) / 256) * 256), batchSize: 512, sequences: 1,
        threads: {ideal: threads, min: threads}, flashAttention, performanceTracking: true
    });
    const progress = (msg) => process.stderr.write(`\rllama_bench: ${base.model} ${msg}        `);
    const records = [];
    const record = (threads, test, nPrompt, nGen, ts, wall, extra = {}) => {
        const s = summary(ts), w = summary(wall);
        records.push({...base, threads, test, mode: "ar", n_prompt: nPrompt, n_gen: nGen, reps, samples_ts: ts,
            avg_ts: s.mean, stddev_ts: s.sd, median_ts: s.median, wall_ts: w.median, ...extra});
    };

    for (const threads of threadList) {
        for (const p of pp) {
            const ts = [], wall = [], ttft = [];
            for (let r = -warmups; r < reps; r++) {
                progress(`t=${threads} pp${p} ${r < 0 ? "warm-up" : `rep ${r + 1}/${reps}`}`);
                const context = await newContext(p + 1, threads);
                const seq = context.getSequence();
                const tokens = randomTokens(p, nVocab, r + 2);
                const greedy = {generateNext: {token: true, options: {temperature: 0}}};
                const t0 = performance.now();
                await seq.controlledEvaluate(tokens.map((t, i) => (i === p - 1 ? [t, greedy] : t)));
                const ms = performance.now() - t0;
                const perf = await perfOf(context);
                await context.dispose();
                if (r < 0) continue;
                if (!perf.prompt || perf.prompt.n !== p) fail(`pp${p}: llama_perf reported ${JSON.stringify(perf)}`);
                ts.push(p * 1000 / perf.prompt.ms), wall.push(p * 1000 / ms), ttft.push(ms);
            }
            record(threads, `pp${p}`, p, 0, ts, wall, {ttft_ms: summary(ttft).median});
        }
        for (const n of tg) {
            const ts = [], wall = [];
            for (let r = -warmups; r < reps; r++) {
                progress(`t=${threads} tg${n} ${r < 0 ? "warm-up" : `rep ${r + 1}/${reps}`}`);
                const context = await newContext(n + 2, threads);
                const seq = context.getSequence();
                const greedy = {generateNext: {token: true, options: {temperature: 0}}};
                let next = (await seq.controlledEvaluate([[randomTokens(1, nVocab, r + 2)[0], greedy]]))[0]?.next?.token;
                const t0 = performance.now();
                for (let i = 0; i < n; i++) {
                    if (next === undefined || next === null) fail(`tg${n}: llama.cpp sampled no token at step ${i}`);
                    next = (await seq.controlledEvaluate([[next, greedy]]))[0]?.next?.token;
                }
                const ms = performance.now() - t0;
                const perf = await perfOf(context);
                await context.dispose();
                if (r < 0) continue;
                // llama_perf counts the one-token prompt as an eval run too: n + 1 runs, all alike.
                if (!perf.decode || perf.decode.n < n) fail(`tg${n}: llama_perf reported ${JSON.stringify(perf)}`);
                ts.push(perf.decode.n * 1000 / perf.decode.ms), wall.push(n * 1000 / ms);
            }
            record(threads, `tg${n}`, 0, n, ts, wall);
        }
    }
    process.stderr.write("\r\x1b[K");
    for (const r of records) r.max_rss_bytes = process.resourceUsage().maxRSS * 1024;
    process.stdout.write(JSON.stringify(records, null, 1) + "\n");
    await model.dispose();
    await llama.dispose();
}

await main();
