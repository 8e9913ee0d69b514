// Starts Swagger UI on /api/docs/ (a static file: the site's CSP runs no inline script).
// The document's URL is on the page; nothing is fetched from anywhere else (no validator badge).
"use strict";
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-url"),
    domNode: root,
    deepLinking: true,
    validatorUrl: null,
    tryItOutEnabled: false,
    supportedSubmitMethods: ["get"],
    defaultModelsExpandDepth: 0,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
