// Benchmark (c): open and close one file 200,000 times from Node (openSync/closeSync).
'use strict';
const fs = require('fs');
const path = process.argv[2] || '/etc/hostname';
for (let i = 0; i < 200000; i++) {
  fs.closeSync(fs.openSync(path, 'r'));
}
