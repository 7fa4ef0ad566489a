(()=>{var r="gateway-host-theme";function e(){try{let t=localStorage.getItem(r);return t==="light"||t==="dark"?t:null}catch{return null}}var o=e();o&&(document.documentElement.dataset.theme=o);})();
