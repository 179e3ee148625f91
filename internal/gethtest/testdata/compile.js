// Compiles TestToken.sol with solc-js into TestToken.bin and TestToken.abi.
// Run once, from a directory where `npm install solc@0.8.37` was done:
//   NODE_PATH=$DIR/node_modules node compile.js
// The EVM version is pinned so the bytes do not change with solc's default.
const fs = require("fs");
const path = require("path");
const solc = require("solc");
const src = fs.readFileSync(path.join(__dirname, "TestToken.sol"), "utf8");
const input = {
  language: "Solidity",
  sources: { "TestToken.sol": { content: src } },
  settings: {
    evmVersion: "cancun",
    optimizer: { enabled: true, runs: 200 },
    metadata: { bytecodeHash: "none" },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
for (const e of out.errors || []) {
  console.error(e.formattedMessage);
  if (e.severity === "error") process.exit(1);
}
const c = out.contracts["TestToken.sol"].TestToken;
fs.writeFileSync(path.join(__dirname, "TestToken.bin"), c.evm.bytecode.object + "\n");
fs.writeFileSync(path.join(__dirname, "TestToken.abi"), JSON.stringify(c.abi, null, 1) + "\n");
console.log("solc", solc.version(), "bytes", c.evm.bytecode.object.length / 2);
